#include <cuda_runtime.h>
#include <cstdio>
__global__ void empty() {}
__global__ void spin(long long n) { long long s = clock64(); while (clock64() - s < n) {} }
__global__ void touch(const unsigned* __restrict__ s, unsigned* d) { int i = blockIdx.x * blockDim.x + threadIdx.x; d[i] = __ldg(s + i * 3) + 1; }
int main() {
	cudaStream_t st; cudaStreamCreate(&st);
	cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
	unsigned *s, *d; cudaMalloc(&s, 64 << 20); cudaMalloc(&d, 64 << 20);
	for (int blocks : {1, 132, 1600, 3200}) {
		for (int kind = 0; kind < 2; kind++) {
			float best = 1e9;
			for (int r = 0; r < 5; r++) {
				spin<<<1, 1, 0, st>>>(20000000);
				cudaEventRecord(e0, st);
				for (int j = 0; j < 200; j++) { if (kind == 0) empty<<<blocks, 256, 0, st>>>(); else touch<<<blocks, 256, 0, st>>>(s, d); }
				cudaEventRecord(e1, st); cudaEventSynchronize(e1);
				float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
			}
			printf("%s blocks %5d: %.2f µs per launch\n", kind ? "one-load" : "empty   ", blocks, best * 1e3 / 200);
		}
	}
}
