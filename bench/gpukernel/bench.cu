#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <functional>
#include <algorithm>
#include "v0.cuh" // extracted by run.sh from runtime/preprocess/gpu_kernels.go
#include "v1.cuh"
#include "v3.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void empty() {}
__global__ void spin(long long n) { long long s = clock64(); while (clock64() - s < n) {} }

static cudaStream_t st;
static cudaEvent_t e0, e1;

double timeit(std::function<void(int)> launch, int per = 200, int reps = 5) {
	launch(0);
	CK(cudaStreamSynchronize(st));
	double tot = 0;
	for (int r = 0; r < reps; r++) {
		spin<<<1, 1, 0, st>>>(20000000);
		cudaEventRecord(e0, st);
		for (int j = 0; j < per; j++) launch(j);
		cudaEventRecord(e1, st);
		CK(cudaEventSynchronize(e1));
		float ms;
		cudaEventElapsedTime(&ms, e0, e1);
		tot += ms;
	}
	CK(cudaGetLastError());
	return tot * 1e3 / (per * reps);  // µs per launch
}

struct Case {
	const char* name;
	int sw, sh, W, H, x0, y0, iw, ih, fl, outBytes;
	float a, need;
};

int main(int argc, char** argv) {
	bool profile = argc > 1;
	CK(cudaStreamCreate(&st));
	cudaEventCreate(&e0); cudaEventCreate(&e1);
	const size_t CB = 256 << 20;
	void *c0, *c1;
	CK(cudaMalloc(&c0, CB)); CK(cudaMalloc(&c1, CB));
	cudaMemset(c0, 1, CB);
	double bwt = timeit([&](int) { cudaMemcpyAsync(c1, c0, CB, cudaMemcpyDeviceToDevice, st); }, 10, 3);
	double bw = 2.0 * CB / (bwt * 1e-6);
	printf("copy bandwidth %.0f GB/s (256 MiB, %.1f µs)\n", bw / 1e9, bwt);

	Case cases[] = {
		{"4K-YUYV-640-fp16-letterbox", 3840, 2160, 640, 640, 0, 140, 640, 360, 2 | 32, 640 * 640 * 3 * 2, 1 / 255.f, 7.99e6f},
		{"1080p-YUYV-224-fp32", 1920, 1080, 224, 224, 0, 0, 224, 224, 32, 224 * 224 * 3 * 4, 1 / 255.f, 2.32e6f},
	};
	const int NS = 12;
	for (auto& c : cases) {
		size_t fb = (size_t)c.sw * c.sh * 2;
		std::vector<unsigned char*> srcs(NS);
		std::vector<unsigned char> h(fb);
		srand(1);
		for (auto& b : h) b = rand() & 0xff;
		for (auto& s : srcs) { CK(cudaMalloc(&s, fb)); CK(cudaMemcpy(s, h.data(), fb, cudaMemcpyHostToDevice)); }
		void *d0, *d1;
		CK(cudaMalloc(&d0, c.outBytes)); CK(cudaMalloc(&d1, c.outBytes));
		int stride = c.sw * 2;
		float rx = (float)c.sw / c.iw, ry = (float)c.sh / c.ih;
		float a = c.a, b = 0;
		float yoff = 16, yg = 255.f / 219, rv = 1.596f, gu = 0.392f, gv = 0.813f, bu = 2.017f;
		auto v0 = [&](unsigned char* s, void* d) {
			dim3 grid((c.W + 31) / 32, (c.H + 7) / 8);
			edged_pre_yuyv<<<grid, dim3(32, 8), 0, st>>>(s, stride, c.sw, c.sh, d, c.W, c.H, 3, c.fl, c.x0, c.y0, c.iw, c.ih, rx, ry, a, a, a, b, b, b, yoff, yg, rv, gu, gv, bu);
		};
		auto v1 = [&](int nx, unsigned char* s, void* d) {
			int gx = (c.iw + 32 * nx - 1) / (32 * nx), gy = (c.ih + 7) / 8;
			int nImg = gx * gy;
			int padThreads = c.H * ((c.W + 7) / 8);
			int nPad = (c.iw == c.W && c.ih == c.H) ? 0 : (padThreads + 255) / 256;
			auto k = nx == 1 ? v1_yuyv_nx1 : nx == 2 ? v1_yuyv_nx2 : v1_yuyv_nx4;
			k<<<nImg + nPad, dim3(32, 8), 0, st>>>(s, stride, c.sw, c.sh, d, c.W, c.H, 3, c.fl, c.x0, c.y0, c.iw, c.ih, rx, ry, a, a, a, b, b, b, yoff, yg, rv, gu, gv, bu, gx, nImg);
		};
		auto v2 = [&](int nx, int perSM, unsigned char* s, void* d) {
			int gx = (c.iw + nx - 1) / nx;
			int nImg = gx * c.ih;
			int nPad = (c.iw == c.W && c.ih == c.H) ? 0 : c.H * ((c.W + 7) / 8);
			int nAll = nImg + nPad;
			int blocks = (nAll + 255) / 256;
			if (perSM > 0) blocks = std::min(blocks, 132 * perSM);
			auto k = nx == 1 ? v2_yuyv_nx1 : v2_yuyv_nx2;
			k<<<blocks, 256, 0, st>>>(s, stride, c.sw, c.sh, d, c.W, c.H, 3, c.fl, c.x0, c.y0, c.iw, c.ih, rx, ry, a, a, a, b, b, b, yoff, yg, rv, gu, gv, bu, gx, nImg, nAll);
		};
		auto v3 = [&](int nx, unsigned char* s, void* d, int by = 8) {
			int gx = (c.iw + 32 * nx - 1) / (32 * nx), gy = (c.ih + by - 1) / by;
			int nImg = gx * gy;
			int padThreads = c.H * ((c.W + 7) / 8);
			int nPad = (c.iw == c.W && c.ih == c.H) ? 0 : (padThreads + 32 * by - 1) / (32 * by);
			auto k = nx == 1 ? v3_yuyv_nx1 : nx == 2 ? v3_yuyv_nx2 : v3_yuyv_nx4;
			if (nx == 2 && by == 16) k = v3_yuyv_nx2_by16;
			if (nx == 2 && by == 32) k = v3_yuyv_nx2_by32;
			if (nx == 2 && by == 4) k = v3_yuyv_nx2_by4;
			float base = -yoff * yg;
			k<<<nImg + nPad, dim3(32, by), 0, st>>>(s, stride, c.sw, c.sh, d, c.W, c.H, 3, c.fl, c.x0, c.y0, c.iw, c.ih, rx, ry, a, a, a, b, b, b,
				yg / 255, (base - 128 * rv) / 255, (base + 128 * (gu + gv)) / 255, (base - 128 * bu) / 255, rv / 255, -gu / 255, -gv / 255, bu / 255, gx, nImg);
		};
		auto v5 = [&](unsigned char* s, void* d) {
			int gx = (c.iw + 1) / 2;
			int nImg = gx * c.ih;
			int nPad = (c.iw == c.W && c.ih == c.H) ? 0 : c.H * ((c.W + 31) / 32);
			float base = -yoff * yg;
			v5_yuyv<<<(nImg + nPad + 1023) / 1024, 1024, 0, st>>>(s, stride, c.sw, c.sh, d, c.W, c.H, 3, c.fl, c.x0, c.y0, c.iw, c.ih, rx, ry, a, a, a, b, b, b,
				yg / 255, (base - 128 * rv) / 255, (base + 128 * (gu + gv)) / 255, (base - 128 * bu) / 255, rv / 255, -gu / 255, -gv / 255, bu / 255, gx, nImg);
		};
		if (profile) {
			for (int i = 0; i < 1; i++) {
				v0(srcs[i], d0); v0(srcs[i], d0);
				v3(2, srcs[i + 3], d1); v3(2, srcs[i + 3], d1);
				for (int by : {4, 16, 32}) { v3(2, srcs[i + by % 11], d1, by); v3(2, srcs[i + by % 11], d1, by); }
				v5(srcs[i + 9], d1); v5(srcs[i + 9], d1);
				empty<<<650, 256, 0, st>>>(); empty<<<1600, 256, 0, st>>>();
				cudaMemcpyAsync(c1, c0, (size_t)(c.need / 2), cudaMemcpyDeviceToDevice, st);
			}
			CK(cudaStreamSynchronize(st));
			continue;
		}
		// correctness against v0
		cudaMemset(d0, 0xff, c.outBytes);
		v0(srcs[0], d0);
		std::vector<unsigned char> r0(c.outBytes), r1(c.outBytes);
		CK(cudaMemcpy(r0.data(), d0, c.outBytes, cudaMemcpyDeviceToHost));
		for (int nx : {1, 2, 4}) {
			cudaMemset(d1, 0xff, c.outBytes);
			v1(nx, srcs[0], d1);
			CK(cudaMemcpy(r1.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			printf("%s v1 nx%d: %s\n", c.name, nx, memcmp(r0.data(), r1.data(), c.outBytes) == 0 ? "identical to v0" : "DIFFERS");
		}
		for (int nx : {1, 2, 4}) {
			cudaMemset(d1, 0xff, c.outBytes);
			v3(nx, srcs[0], d1);
			CK(cudaMemcpy(r1.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			int ndiff = 0; double md = 0;
			bool half = c.fl & 2;
			int ne = c.outBytes / (half ? 2 : 4);
			for (int i = 0; i < ne; i++) {
				float x, y;
				if (half) { x = __half2float(((__half*)r0.data())[i]); y = __half2float(((__half*)r1.data())[i]); }
				else { x = ((float*)r0.data())[i]; y = ((float*)r1.data())[i]; }
				double dd = fabs((double)x - y); if (!(dd <= 1e-9)) ndiff++; if (!(dd <= md)) md = dd;
			}
			printf("%s v3 nx%d: %d of %d elements differ from v0, max %.3g\n", c.name, nx, ndiff, ne, md);
		}
		for (int nx : {1, 2}) for (int ps : {0, 4, 8}) {
			cudaMemset(d1, 0xff, c.outBytes);
			v2(nx, ps, srcs[0], d1);
			CK(cudaMemcpy(r1.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			printf("%s v2 nx%d perSM %d: %s\n", c.name, nx, ps, memcmp(r0.data(), r1.data(), c.outBytes) == 0 ? "identical to v0" : "DIFFERS");
		}
		cudaFuncAttributes fa;
		cudaFuncGetAttributes(&fa, edged_pre_yuyv);
		printf("regs v0 %d", fa.numRegs);
		for (auto k : {v1_yuyv_nx1, v1_yuyv_nx2, v1_yuyv_nx4}) { cudaFuncGetAttributes(&fa, k); printf(" v1 %d", fa.numRegs); }
		for (auto k : {v3_yuyv_nx1, v3_yuyv_nx2, v3_yuyv_nx4}) { cudaFuncGetAttributes(&fa, k); printf(" v3 %d", fa.numRegs); }
		printf("\n");
		double roof = c.need / bw * 1e6;
		auto report = [&](const char* n, double hot, double cold) {
			printf("%-28s %-12s hot %6.2f µs (%.2f of roofline)  cold %6.2f µs (%.2f)\n", c.name, n, hot, roof / hot, cold, roof / cold);
		};
		report("v0", timeit([&](int) { v0(srcs[0], d0); }), timeit([&](int j) { v0(srcs[j % NS], d0); }));
		for (int nx : {1, 2, 4})
			report(nx == 1 ? "v1-nx1" : nx == 2 ? "v1-nx2" : "v1-nx4", timeit([&](int) { v1(nx, srcs[0], d1); }), timeit([&](int j) { v1(nx, srcs[j % NS], d1); }));
		for (int nx : {1, 2, 4}) {
			char n[32]; snprintf(n, sizeof n, "v3-nx%d", nx);
			report(n, timeit([&](int) { v3(nx, srcs[0], d1); }), timeit([&](int j) { v3(nx, srcs[j % NS], d1); }));
		}
		{
			cudaMemset(d1, 0xff, c.outBytes);
			v5(srcs[0], d1);
			CK(cudaMemcpy(r1.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			std::vector<unsigned char> r2(c.outBytes);
			v3(2, srcs[0], d1);
			CK(cudaMemcpy(r2.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			printf("%s v5 equals v3-nx2: %d\n", c.name, memcmp(r1.data(), r2.data(), c.outBytes) == 0);
			report("v5-1024x1", timeit([&](int) { v5(srcs[0], d1); }), timeit([&](int j) { v5(srcs[j % NS], d1); }));
		}
		for (int by : {4, 16, 32}) {
			char n[32]; snprintf(n, sizeof n, "v3-nx2-by%d", by);
			cudaMemset(d1, 0xff, c.outBytes);
			v3(2, srcs[0], d1, by);
			CK(cudaMemcpy(r1.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			std::vector<unsigned char> r2(c.outBytes);
			v3(2, srcs[0], d1);
			CK(cudaMemcpy(r2.data(), d1, c.outBytes, cudaMemcpyDeviceToHost));
			printf("%s %s equals v3-nx2: %d\n", c.name, n, memcmp(r1.data(), r2.data(), c.outBytes) == 0);
			report(n, timeit([&](int) { v3(2, srcs[0], d1, by); }), timeit([&](int j) { v3(2, srcs[j % NS], d1, by); }));
		}
		for (int nx : {1, 2}) for (int ps : {0, 4, 8}) {
			char n[32]; snprintf(n, sizeof n, "v2-nx%d-sm%d", nx, ps);
			report(n, timeit([&](int) { v2(nx, ps, srcs[0], d1); }), timeit([&](int j) { v2(nx, ps, srcs[j % NS], d1); }));
		}
		size_t half = (size_t)(c.need / 2);
		report("copy-same", timeit([&](int) { cudaMemcpyAsync(c1, c0, half, cudaMemcpyDeviceToDevice, st); }),
			timeit([&](int j) { size_t o = (size_t)(j % 24) * (8 << 20); cudaMemcpyAsync((char*)c1 + o, (char*)c0 + o, half, cudaMemcpyDeviceToDevice, st); }));
		for (auto s : srcs) cudaFree(s);
		cudaFree(d0); cudaFree(d1);
	}
	return 0;
}
