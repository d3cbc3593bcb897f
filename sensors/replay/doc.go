// Package replay plays recorded frames back as a sensors.Source: raw frame
// files written by [Recorder] (or by edged itself), and folders of PNG or
// JPEG images. It serves tests, demos and offline debugging: a recording
// of a misbehaving camera can be replayed through the same pipeline.
//
// # Raw frame files
//
// A file is a 32-byte header followed by records, all little-endian:
//
//	header:  magic "EDGEDRAW" | version u32 = 1 | width u32 | height u32 |
//	         fourcc u32 | stride u32 (0 = packed) | fps_milli u32 (0 = unknown)
//	record:  length u32 | flags u32 | delta_ns i64 | length bytes of frame data
//
// fourcc is the V4L2 pixel format (YUYV, UYVY, NV12, GREY, RGB3, BGR3,
// MJPG); delta_ns is the capture time of the frame minus that of the
// previous one (0 for the first); flags are sensors.Frame flags. A record
// longer than the format's FrameSize is rejected as corrupt.
//
// A file recorded as MJPG (a camera's JPEG buffers as they came) replays
// as decoded RGB24 frames (package jpeg, at the scale SetDecodeTarget asks
// for, Format.Downscale), like a live MJPEG camera; a recorded frame that
// does not decode is delivered with sensors.FlagError and no bytes, for
// the consumer to drop and count.
//
// Frames are read straight into the leased slot: replaying a raw file
// allocates nothing per frame.
//
// # Image folders
//
// Every *.png, *.jpg and *.jpeg in the folder, sorted by name, becomes one
// frame, converted to the configured pixel format (default RGB24; YUV with
// BT.601 limited range, see package pixconv). What a file is comes from
// its content (a PNG signature or a JPEG SOI), not its name. All images
// must have the size of the first usable one (at most 16384 pixels a
// side; ProbeFolder says which). Decoding allocates (image/png; JPEG goes
// through package jpeg's decoder, at full size).
//
// Every image is judged before it is decoded: the file is read whole
// (refused unread when it is larger than eight bytes a pixel of the
// folder's size plus 4 MiB), its header (PNG IHDR; JPEG markers up to
// the first scan, jpeg.ParseHeader) is checked and its size compared with
// the folder's, and only then are the same bytes decoded, so no decoder
// ever allocates for a size the folder does not have. A file that fails
// (another size, damaged, not PNG or JPEG, a JPEG feature not every
// decoder handles, gone) is skipped: Next returns an error wrapping
// sensors.ErrSkipped that names it and why, and the next Next goes on
// with the next image. A looping pass in which every image was skipped
// is an error (not a skip), so the caller backs off and starts again.
//
// # Timing
//
// By default a file plays at its recorded pace (the deltas) and a folder
// as fast as the consumer takes frames; Options.FPS imposes a fixed rate
// on either and Options.FreeRun removes all pacing. Frame.TCapture is the
// CLOCK_MONOTONIC time a frame is emitted, Seq counts emitted frames. At
// the end Next returns sensors.ErrEOF unless Options.Loop is set.
package replay
