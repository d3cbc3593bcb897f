// Package atomicfile writes a file so that a reader, or a power cut, sees
// the old content or the new one and never a torn mix: the data goes to a
// temporary file in the same folder, is fsynced, renamed over the target,
// and the folder is fsynced so the rename itself is durable.
//
// edged uses it for the last-good model copies (runtime), the NVRTC kernel
// cache (umem) and `edged demo-model -o` (a daemon watching that folder
// must never load half a model).
package atomicfile
