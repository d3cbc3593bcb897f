// Command batchbench measures N cameras on one model through the real
// edged binary (bin/edged, run with a configuration it writes per case):
// N = 1, 2, 4, 8 replay cameras of noisy 1920x1080 YUYV, ONNX Runtime on
// the CPU, the benchmark classifier (bench/internal/onnxmodel) with a
// symbolic batch dimension, three ways:
//
//   - own: a pipeline and a [[model]] table per camera, so an engine (an
//     ONNX Runtime session) per camera, as before engines were shared;
//   - shared: a pipeline per camera on one [[model]]: one session, an
//     engine per pipeline on it;
//   - batched: one pipeline with sources = [...], batch = N: one
//     inference of up to N frames.
//
// Each case runs in phases: paced (every camera at -fps: results/s,
// p50/p99 of the records' latency_us.total, resident memory), saturation
// (every camera free-running: results/s, CPU per result) and, at the
// largest N, stalled (paced, and the last camera's recording delivers
// -stall-after of frames and then nothing for an hour, without any error:
// a camera that stops delivering unannounced). The bench reads the
// records from the socket sink as a client, one daemon at a time, cases
// of the ways interleaved, and writes report.md, batch.png (a plot of
// the three figures against N) and results.json (every run, every
// camera's totals) into -out, with every case's configuration and log.
//
// It checks two bounds and exits 1 when one does not hold:
//
//	RSS(8) − RSS(1) ≤ 7 × one camera's frame pool × 1.1        (shared, batched)
//	others' p99 total, one stalled ≤ their unstalled p99 + batch_wait
//
// A way the binary does not accept (edged check fails on its
// configuration: an edged without sources = [...]) is left out, saying
// so. Usage (make bench-batch):
//
//	bin/batchbench [-edged bin/edged] [-n 1,2,4,8] [-ways own,shared,batched] [-fps 15] [-wait 2ms] [-measure 8s] [-rounds 1]
package main
