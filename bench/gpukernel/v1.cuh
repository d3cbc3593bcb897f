// Candidate: image blocks compute NX horizontally adjacent pixels per thread;
// padding blocks fill 8 consecutive pixels of a row per thread.
__device__ __forceinline__ void store2h(void* dst, size_t i, float a, float b) {
	u16 h0, h1;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h0) : "f"(a));
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h1) : "f"(b));
	((u32*)dst)[i >> 1] = (u32)h0 | ((u32)h1 << 16);
}

// storeRun writes NX adjacent output pixels (v, normalised) from image
// column ix0 of image row iy: paired fp16 stores where they line up.
template <int NX>
__device__ __forceinline__ void storeRun(void* __restrict__ dst, int W, int H, int fl,
	int x0, int y0, int iw, int ix0, int iy, const float3* v)
{
	size_t plane = (size_t)W * H, px = (size_t)(y0 + iy) * W + x0 + ix0;
	int n = min(NX, iw - ix0);
	if (NX == 2 && n == 2 && !(fl & F_NHWC) && (fl & F_HALF) && !(px & 1)) {
		store2h(dst, px, v[0].x, v[1].x);
		store2h(dst, plane + px, v[0].y, v[1].y);
		store2h(dst, 2 * plane + px, v[0].z, v[1].z);
		return;
	}
	#pragma unroll
	for (int j = 0; j < NX; j++) {
		if (j >= n) break;
		size_t q = px + j;
		if (fl & F_NHWC) {
			store(dst, q * 3, v[j].x, fl); store(dst, q * 3 + 1, v[j].y, fl); store(dst, q * 3 + 2, v[j].z, fl);
		} else {
			store(dst, q, v[j].x, fl); store(dst, plane + q, v[j].y, fl); store(dst, 2 * plane + q, v[j].z, fl);
		}
	}
}

template <class P, int NX>
__device__ __forceinline__ void image(const u8* __restrict__ src, int stride, int sw, int sh,
	void* __restrict__ dst, int W, int H, int C, int fl,
	int x0, int y0, int iw, int ih, float rx, float ry,
	float a0, float a1, float a2, float b0, float b1, float b2,
	const Yuv& k, int ix0, int iy)
{
	float3 v[NX];
	#pragma unroll
	for (int j = 0; j < NX; j++) {
		int ix = min(ix0 + j, iw - 1);
		int xa, xb, ya, yb;
		float wx, wy;
		linear(ix, rx, sw, xa, xb, wx);
		linear(iy, ry, sh, ya, yb, wy);
		float3 p00 = P::at(src, stride, sh, xa, ya, k, fl), p01 = P::at(src, stride, sh, xb, ya, k, fl);
		float3 p10 = P::at(src, stride, sh, xa, yb, k, fl), p11 = P::at(src, stride, sh, xb, yb, k, fl);
		float3 t = fma3(wx, make_float3(p01.x - p00.x, p01.y - p00.y, p01.z - p00.z), p00);
		float3 b = fma3(wx, make_float3(p11.x - p10.x, p11.y - p10.y, p11.z - p10.z), p10);
		float3 rgb = fma3(wy, make_float3(b.x - t.x, b.y - t.y, b.z - t.z), t);
		if (fl & F_BGR) { float q = rgb.x; rgb.x = rgb.z; rgb.z = q; }
		v[j] = make_float3(fmaf(rgb.x, a0, b0), fmaf(rgb.y, a1, b1), fmaf(rgb.z, a2, b2));
	}
	storeRun<NX>(dst, W, H, fl, x0, y0, iw, ix0, iy, v);
}

// padding fills G consecutive pixels of output row t / ceil(W/G) that lie
// outside the image (whole padding rows of planar fp16 with 16-byte
// stores).
template <int G>
__device__ __forceinline__ void padding(void* __restrict__ dst, int W, int H, int fl,
	int x0, int y0, int iw, int ih, float a0, float a1, float a2, float b0, float b1, float b2, int t)
{
	int groups = (W + G - 1) / G;
	int oy = t / groups, ox0 = (t - oy * groups) * G;
	if (oy >= H) return;
	bool rowPad = oy < y0 || oy >= y0 + ih;
	float p0 = fmaf(114.f, a0, b0), p1 = fmaf(114.f, a1, b1), p2 = fmaf(114.f, a2, b2);
	size_t plane = (size_t)W * H, px = (size_t)oy * W + ox0;
	if (rowPad && ox0 + G <= W && !(fl & F_NHWC) && (fl & F_HALF) && !(px & 7)) {
		u16 h0, h1, h2;
		asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h0) : "f"(p0));
		asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h1) : "f"(p1));
		asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h2) : "f"(p2));
		u32 w0 = h0 | (u32)h0 << 16, w1 = h1 | (u32)h1 << 16, w2 = h2 | (u32)h2 << 16;
		#pragma unroll
		for (int q = 0; q < G / 8; q++) {
			((uint4*)dst)[(px >> 3) + q] = make_uint4(w0, w0, w0, w0);
			((uint4*)dst)[((plane + px) >> 3) + q] = make_uint4(w1, w1, w1, w1);
			((uint4*)dst)[((2 * plane + px) >> 3) + q] = make_uint4(w2, w2, w2, w2);
		}
		return;
	}
	for (int j = 0; j < G; j++) {
		int ox = ox0 + j;
		if (ox >= W) break;
		if (!rowPad && ox >= x0 && ox < x0 + iw) continue;
		size_t q = px + j;
		if (fl & F_NHWC) {
			store(dst, q * 3, p0, fl); store(dst, q * 3 + 1, p1, fl); store(dst, q * 3 + 2, p2, fl);
		} else {
			store(dst, q, p0, fl); store(dst, plane + q, p1, fl); store(dst, 2 * plane + q, p2, fl);
		}
	}
}

#define KERNEL2(NAME, P, NX) \
extern "C" __global__ void __launch_bounds__(256) NAME(const u8* __restrict__ src, int stride, int sw, int sh, \
	void* __restrict__ dst, int W, int H, int C, int fl, \
	int x0, int y0, int iw, int ih, float rx, float ry, \
	float a0, float a1, float a2, float b0, float b1, float b2, \
	float yoff, float ygain, float rv, float gu, float gv, float bu, int gx, int nImg) { \
	int b = blockIdx.x; \
	if (b >= nImg) { \
		padding<8>(dst, W, H, fl, x0, y0, iw, ih, a0, a1, a2, b0, b1, b2, (b - nImg) * 256 + threadIdx.y * 32 + threadIdx.x); \
		return; \
	} \
	int ty = b / gx, tx = b - ty * gx; \
	int ix = (tx * 32 + threadIdx.x) * NX, iy = ty * 8 + threadIdx.y; \
	if (ix >= iw || iy >= ih) return; \
	Yuv k = {yoff, ygain, rv, gu, gv, bu}; \
	image<P, NX>(src, stride, sw, sh, dst, W, H, C, fl, x0, y0, iw, ih, rx, ry, a0, a1, a2, b0, b1, b2, k, ix, iy); \
}

KERNEL2(v1_yuyv_nx1, YUYV, 1)
KERNEL2(v1_yuyv_nx2, YUYV, 2)
KERNEL2(v1_yuyv_nx4, YUYV, 4)

// v2: a 1-D grid of at most a few blocks per SM; threads stride over the
// work items: image items (NX adjacent pixels of a row) first, then
// padding items (8 pixels of a row).
template <class P, int NX>
__device__ __forceinline__ void v2body(const u8* __restrict__ src, int stride, int sw, int sh,
	void* __restrict__ dst, int W, int H, int C, int fl,
	int x0, int y0, int iw, int ih, float rx, float ry,
	float a0, float a1, float a2, float b0, float b1, float b2,
	const Yuv& k, int gx, int nImg, int nAll)
{
	for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < nAll; t += gridDim.x * blockDim.x) {
		if (t < nImg) {
			int iy = t / gx, ix = (t - iy * gx) * NX;
			image<P, NX>(src, stride, sw, sh, dst, W, H, C, fl, x0, y0, iw, ih, rx, ry, a0, a1, a2, b0, b1, b2, k, ix, iy);
		} else {
			padding<8>(dst, W, H, fl, x0, y0, iw, ih, a0, a1, a2, b0, b1, b2, t - nImg);
		}
	}
}

#define KERNEL3(NAME, P, NX) \
extern "C" __global__ void __launch_bounds__(256) NAME(const u8* __restrict__ src, int stride, int sw, int sh, \
	void* __restrict__ dst, int W, int H, int C, int fl, \
	int x0, int y0, int iw, int ih, float rx, float ry, \
	float a0, float a1, float a2, float b0, float b1, float b2, \
	float yoff, float ygain, float rv, float gu, float gv, float bu, int gx, int nImg, int nAll) { \
	Yuv k = {yoff, ygain, rv, gu, gv, bu}; \
	v2body<P, NX>(src, stride, sw, sh, dst, W, H, C, fl, x0, y0, iw, ih, rx, ry, a0, a1, a2, b0, b1, b2, k, gx, nImg, nAll); \
}
KERNEL3(v2_yuyv_nx1, YUYV, 1)
KERNEL3(v2_yuyv_nx2, YUYV, 2)
