// Package preprocess turns a captured frame into an engine input tensor on
// the CPU: colour conversion (YUYV, UYVY, NV12, GREY, RGB24, BGR24 to RGB),
// bilinear resize (stretch or letterbox) and per-channel normalisation into
// planar NCHW float32. It is the reference path for CPU backends and the
// numeric reference for GPU kernels. YUV input is BT.601 limited range.
//
// A Preprocessor caches its sampling tables for one source and destination
// size; converting a frame allocates nothing.
package preprocess
