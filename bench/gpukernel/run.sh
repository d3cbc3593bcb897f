#!/bin/bash
# The kernel-shape experiments behind docs/PERFORMANCE.md ("The GPU kernel"):
# the product kernel (extracted from runtime/preprocess/gpu_kernels.go as v0)
# against launch shapes tried instead, timed back to back with CUDA events
# (L2-warm and rotating through 12 frames), then under Nsight Compute with
# and without cache flushing, plus empty kernels for the launch floor.
# Needs nvcc and ncu (CUDA 12+); run on the GPU machine from the repository root:
#   bash bench/gpukernel/run.sh
set -e
cd "$(dirname "$0")"
tmp=$(mktemp -d)
python3 extract.py ../../runtime/preprocess/gpu_kernels.go "$tmp/v0.cuh"
nvcc -O3 -arch=sm_90 -std=c++17 -I"$tmp" -I. -o "$tmp/kbench" bench.cu
nvcc -O3 -arch=sm_90 -o "$tmp/floor" floor.cu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$tmp/floor"
"$tmp/kbench"
for cc in none all; do
	echo "== ncu, cache-control $cc (each kernel launched twice on the same frame)"
	ncu --cache-control $cc --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum \
		"$tmp/kbench" profile 2>&1 | grep -E '^  [a-zA-Z_0-9]+ \(|gpu__time|dram__bytes_read' | sed 's/  */ /g'
done
rm -rf "$tmp"
