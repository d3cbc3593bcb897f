// Command benchcmp runs edged and a Python loop (bench/pyloop/loop.py) side
// by side on the same inputs (benchgen's replay files and model, the same
// ONNX Runtime thread count) and reports per-stage p50/p99, overhead =
// total − infer, throughput at saturation, CPU time per frame and RSS, as
// JSON, a Markdown table and a PNG plot. bench/README.md explains what is
// compared and the caveats.
//
// Each input gets four runs, one after the other, never two at once:
//
//  1. edged at saturation: the replay source free-running, schedule =
//     "queue" (every frame, in order);
//  2. the Python loop as fast as it goes;
//  3. edged paced at -pace × the lower of the two throughputs;
//  4. the Python loop paced at the same rate (--fps: a camera's blocking
//     read, not timed).
//
// Throughput, CPU time per frame and RSS come from 1 and 2; the per-stage
// latencies from 3 and 4, where no frame waits behind another (at
// saturation edged's total includes the wait in its queue).
//
// It needs no Go at run time: build it with CGO_ENABLED=0.
package main
