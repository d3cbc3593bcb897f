// Package synthetic is a deterministic camera: the demo scene of
// internal/demoscene (a white square bouncing over a background that
// cycles through demoscene.Palette)
// drawn straight into slots leased from a sensors.SlotPool, in any of the
// pixel formats of package sensors, at a fixed frame rate or free-running.
//
// The scene is a pure function of the options and the frame's Seq, so the
// result the daemon computes for a frame can be checked against
// [TruthAt]: background palette index (demoscene.Palette[(seq/PeriodFrames)%8]) and
// the square's position. The square's side and corner are even, so the
// chroma of 4:2:2 and 4:2:0 formats never straddles its edges.
//
// YUV formats use BT.601 limited range and GREY full-range luma (see
// package pixconv, whose converter builds the coloured lines). Raw formats
// are drawn by copying pre-encoded lines and allocate nothing per frame;
// MJPEG is JPEG-encoded with image/jpeg (the slow path, which allocates)
// and then, like a V4L2 MJPEG camera's frames, decoded into the slot as
// RGB24 by package jpeg, at the scale SetDecodeTarget asks for; with
// Options.Encoded the JPEG bytes themselves are delivered.
package synthetic
