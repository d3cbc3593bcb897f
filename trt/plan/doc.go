// Package plan checks TensorRT engine ("plan") files before they are handed
// to TensorRT, so that a truncated, mislabelled or foreign file is rejected
// with a reason a person can act on instead of a deserialisation failure
// deep inside libnvinfer.
//
// It needs no TensorRT and no cgo: it reads the 28-byte plan header and, for
// engines exported by Ultralytics, the length-prefixed JSON metadata in front
// of it.
//
// # Plan header
//
// A serialized TensorRT engine starts with the ASCII bytes "ftrt" (the
// little-endian uint32 0x74727466). The second uint32 is 0 for every layout
// NVIDIA's trtexec --getPlanVersionOnly understands, and bytes 24..27 then
// hold the major, minor, patch and build number of the TensorRT that built
// the engine. trtexec documents that this field is present only for engines
// built by TensorRT 8.6 and later, so the version comparison is skipped when
// the loaded library is older than 8.6 (JetPack 5.1 ships 8.5.2); TensorRT
// itself still refuses a mismatched engine there, and the tensorrt backend
// maps its "Version tag does not match" message to trt.ErrVersion.
//
// # Version-compatible engines
//
// Engines built with the kVERSION_COMPATIBLE builder flag (trtexec
// --versionCompatible) run on later TensorRT minors of the same major, and
// TensorRT 8.6 version-compatible engines on TensorRT 10. Nothing in the
// documented part of the header says whether an engine was built that way,
// so the caller states it: [Options.VersionCompatible] comes from the model's
// `version_compatible = true` configuration key.
//
// # Wrapped engines
//
// Ultralytics' exporter writes a little-endian int32 length, that many bytes
// of JSON metadata, and then the plan. [Parse] unwraps such files, returns the
// plan and the decoded [Metadata] (class names, input size, stride, task,
// batch), and rejects a wrapper whose JSON or inner plan is broken.
package plan
