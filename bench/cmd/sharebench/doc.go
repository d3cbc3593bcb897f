// Command sharebench measures what pipelines sharing one model cost in
// resident memory: N = 1, 2, 4, 8 pipelines (synthetic 1920x1080 YUYV
// cameras, ONNX Runtime on the CPU, the benchmark classifier with a hidden
// layer of -hidden units, 16 MiB of weights at 4096) with the model shared
// (edged's behaviour: one ONNX Runtime session, an engine per pipeline on
// it) and with one engine per pipeline (the behaviour before engines were
// shared: the backend's engines are wrapped so that they cannot share, and
// every pipeline loads the model itself), in one run.
//
// Each case runs in a child process of its own (the same binary with
// -child), which starts the daemon in process (runtime.New with a sink
// that discards), waits until every pipeline has produced results, lets
// it run for -settle, returns the Go heap's garbage to the system
// (debug.FreeOSMemory, so that the collector's timing does not decide the
// figure) and reports the median of VmRSS read every 100 ms over -sample,
// and VmHWM. The parent prints a table with the ratio
// shared/separate per N, and checks the bound
//
//	RSS(8) − RSS(1) ≤ 7 × one camera's frame pool × 1.1   (shared)
//
// exiting 1 when it does not hold. Usage (make bench-share):
//
//	EDGED_ONNXRUNTIME_LIB=… go run ./bench/cmd/sharebench [-n 1,2,4,8] [-hidden 4096] [-settle 3s] [-sample 2s]
package main
