// Command benchgen writes the inputs of the side-by-side benchmark
// (bench/README.md) into a folder:
//
//   - noisy-WxH.edgedraw: N frames of seeded uniform random bytes (valid
//     YUYV; nothing compresses or predicts them),
//   - flat-WxH.edgedraw: N frames of one colour each,
//
// for each size (default 1920x1080 and 3840x2160), as raw replay files
// (sensors/replay's EDGEDRAW format, written by replay.Recorder) with every
// recorded delta 0 and no frame rate, so a replay source plays them as fast
// as it is asked;
//
//   - model.onnx: the benchmark classifier (bench/internal/onnxmodel),
//   - inputs.json: the manifest benchcmp reads, written last.
//
// The same flags give the same bytes.
package main
