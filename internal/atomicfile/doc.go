// Package atomicfile writes a file so that a reader, or a power cut, sees
// the old content or the new one and never a torn mix: the data goes to a
// temporary file in the same folder, is fsynced, renamed over the target,
// and the folder is fsynced so the rename itself is durable.
//
// edged uses it for the last-good model copies (runtime), the NVRTC kernel
// cache (umem) and `edged demo-model -o` (a daemon watching that folder
// must never load half a model). WriteIn writes inside an os.Root, so no
// symbolic link leads the write out of the folder (the state folder).
//
// A temporary is locked (flock) while it is written, so the temporaries
// that a killed process leaves behind can be told from one being written
// now, by another process too: RemoveStale removes them (edged does at
// start for its own folders). TempDir and RemoveStaleDirs do the same for
// private folders (the socket sink binds its socket in one).
package atomicfile
