package preprocess

// kernelSource is the CUDA C of the fused preprocessing kernels, compiled
// at run time by NVRTC for the device (umem.Device.Compile, cached on
// disk). One kernel per source format; each thread writes one output
// pixel (every channel): colour conversion of the source pixels its
// filter reads, the resize, the normalisation, the channel order and the
// layout and type of the engine input — one pass, no intermediate image.
// It computes the function documented on Options; gpu_test.go checks it
// against the CPU reference.
//
// Flags (the flags argument): bit 0 NHWC, bit 1 fp16, bit 2 BGR order,
// bit 3 area filter along x, bit 4 area filter along y, bit 5 the source
// rows are 4-byte aligned (word loads for YUYV/UYVY).
//
// The batch kernels convert the frames of a batch in one launch, each
// frame from a table of descriptors (struct Desc, 64 bytes, written by
// GPU.RunBatch) into its entry of the batched tensor, computing per pixel
// exactly what the kernel of one frame does. _batch (bilinear filter):
// tiles, several output pixels a thread, the letterbox rows written
// without sampling; _batch_area (any filter): block z converts frame z,
// one thread per output pixel (pre).
const kernelSource = `
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

#define F_NHWC  1
#define F_HALF  2
#define F_BGR   4
#define F_AREAX 8
#define F_AREAY 16
#define F_ALIGN 32

struct Yuv { float yoff, ygain, rv, gu, gv, bu; };

__device__ __forceinline__ float clamp255(float v) { return fminf(fmaxf(v, 0.f), 255.f); }

__device__ __forceinline__ float3 yuv2rgb(float y, float u, float v, const Yuv& k) {
	float c = (y - k.yoff) * k.ygain, d = u - 128.f, e = v - 128.f;
	return make_float3(clamp255(c + k.rv * e), clamp255(c - k.gu * d - k.gv * e), clamp255(c + k.bu * d));
}

// Pixel readers: RGB in [0, 255] of source pixel (x, y).
struct YUYV {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		const u8* p = s + (size_t)y * stride + 4 * (x >> 1);
		if (fl & F_ALIGN) {
			u32 w = __ldg((const u32*)p);
			float Y = (float)((x & 1) ? (w >> 16) & 0xff : w & 0xff);
			return yuv2rgb(Y, (float)((w >> 8) & 0xff), (float)(w >> 24), k);
		}
		return yuv2rgb((float)p[2 * (x & 1)], (float)p[1], (float)p[3], k);
	}
};
struct UYVY {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		const u8* p = s + (size_t)y * stride + 4 * (x >> 1);
		if (fl & F_ALIGN) {
			u32 w = __ldg((const u32*)p);
			float Y = (float)((x & 1) ? w >> 24 : (w >> 8) & 0xff);
			return yuv2rgb(Y, (float)(w & 0xff), (float)((w >> 16) & 0xff), k);
		}
		return yuv2rgb((float)p[1 + 2 * (x & 1)], (float)p[0], (float)p[2], k);
	}
};
struct NV12 {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		const u8* uv = s + (size_t)stride * h + (size_t)(y >> 1) * stride + 2 * (x >> 1);
		return yuv2rgb((float)s[(size_t)y * stride + x], (float)uv[0], (float)uv[1], k);
	}
};
struct GREY {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		float v = (float)s[(size_t)y * stride + x];
		return make_float3(v, v, v);
	}
};
struct RGB24 {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		const u8* p = s + (size_t)y * stride + 3 * x;
		return make_float3((float)p[0], (float)p[1], (float)p[2]);
	}
};
struct BGR24 {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		const u8* p = s + (size_t)y * stride + 3 * x;
		return make_float3((float)p[2], (float)p[1], (float)p[0]);
	}
};

__device__ __forceinline__ float3 fma3(float w, float3 v, float3 acc) {
	return make_float3(fmaf(w, v.x, acc.x), fmaf(w, v.y, acc.y), fmaf(w, v.z, acc.z));
}

// Bilinear taps of destination index i: the OpenCV INTER_LINEAR centre
// (i + 0.5)·r − 0.5 clamped to [0, n−1].
__device__ __forceinline__ void linear(int i, float r, int n, int& i0, int& i1, float& w) {
	float s = fmaxf((i + 0.5f) * r - 0.5f, 0.f);
	i0 = min((int)s, n - 1);
	i1 = min(i0 + 1, n - 1);
	w = s - (float)i0;
}

__device__ __forceinline__ void store(void* dst, size_t i, float v, int fl) {
	if (fl & F_HALF) {
		u16 h;
		asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
		((u16*)dst)[i] = h;
	} else {
		((float*)dst)[i] = v;
	}
}

// Pair reads the two taps (xa, y) and (xb, y) of a row; a reader may
// specialise it to share a load between them.
template <class P>
struct Pair {
	__device__ static __forceinline__ void at(const u8* s, int stride, int h, int xa, int xb, int y, const Yuv& k, int fl,
		float3& a, float3& b) {
		a = P::at(s, stride, h, xa, y, k, fl);
		b = P::at(s, stride, h, xb, y, k, fl);
	}
};

// Bilinear sample of image pixel (ix, iy): RGB in [0, 255] from the four
// taps of the OpenCV INTER_LINEAR centre.
template <class P>
__device__ __forceinline__ float3 bilinear(const u8* __restrict__ src, int stride, int sw, int sh,
	int ix, int iy, float rx, float ry, const Yuv& k, int fl)
{
	int xa, xb, ya, yb;
	float wx, wy;
	linear(ix, rx, sw, xa, xb, wx);
	linear(iy, ry, sh, ya, yb, wy);
	float3 p00, p01, p10, p11;
	Pair<P>::at(src, stride, sh, xa, xb, ya, k, fl, p00, p01);
	Pair<P>::at(src, stride, sh, xa, xb, yb, k, fl, p10, p11);
	float3 t = fma3(wx, make_float3(p01.x - p00.x, p01.y - p00.y, p01.z - p00.z), p00);
	float3 b = fma3(wx, make_float3(p11.x - p10.x, p11.y - p10.y, p11.z - p10.z), p10);
	return fma3(wy, make_float3(b.x - t.x, b.y - t.y, b.z - t.z), t);
}

// Area-filtered (per axis where the flags say so, else the two bilinear
// taps) sample of image pixel (ix, iy): separable, per axis either the
// area footprint [i·r, (i+1)·r) with overlap weights / r, or the taps.
template <class P>
__device__ __forceinline__ float3 area(const u8* __restrict__ src, int stride, int sw, int sh,
	int ix, int iy, float rx, float ry, const Yuv& k, int fl)
{
	int xs, xe, ys, ye, xa = 0, xb = 0, ya = 0, yb = 0;
	float fx0 = 0.f, fx1 = 0.f, fy0 = 0.f, fy1 = 0.f, wx = 0.f, wy = 0.f;
	if (fl & F_AREAX) {
		fx0 = ix * rx; fx1 = fminf(fx0 + rx, (float)sw);
		xs = (int)fx0; xe = min((int)ceilf(fx1), sw);
	} else {
		linear(ix, rx, sw, xa, xb, wx); xs = 0; xe = 2;
	}
	if (fl & F_AREAY) {
		fy0 = iy * ry; fy1 = fminf(fy0 + ry, (float)sh);
		ys = (int)fy0; ye = min((int)ceilf(fy1), sh);
	} else {
		linear(iy, ry, sh, ya, yb, wy); ys = 0; ye = 2;
	}
	float3 rgb = make_float3(0.f, 0.f, 0.f);
	float wsum = 0.f;
	for (int j = ys; j < ye; j++) {
		int y;
		float vy;
		if (fl & F_AREAY) { y = j; vy = fminf((float)(j + 1), fy1) - fmaxf((float)j, fy0); }
		else { y = j == 0 ? ya : yb; vy = j == 0 ? 1.f - wy : wy; }
		float3 row = make_float3(0.f, 0.f, 0.f);
		float rsum = 0.f;
		for (int i = xs; i < xe; i++) {
			int x;
			float vx;
			if (fl & F_AREAX) { x = i; vx = fminf((float)(i + 1), fx1) - fmaxf((float)i, fx0); }
			else { x = i == 0 ? xa : xb; vx = i == 0 ? 1.f - wx : wx; }
			row = fma3(vx, P::at(src, stride, sh, x, y, k, fl), row);
			rsum += vx;
		}
		rgb = fma3(vy / rsum, row, rgb);
		wsum += vy;
	}
	return make_float3(rgb.x / wsum, rgb.y / wsum, rgb.z / wsum);
}

// The normalisation of the engine input: a·v + b per channel.
struct Norm { float a0, a1, a2, b0, b1, b2; };

// finish turns RGB in [0, 255] into the output values: channel order,
// then a·v + b (C = 1: the luma, in .x). Explicit FMAs only, so the result
// is the same whether the compiler sees rgb as a constant (padding) or not.
__device__ __forceinline__ float3 finish(float3 rgb, int C, int fl, const Norm& n) {
	if (C == 1) {
		float l = fmaf(0.114f, rgb.z, fmaf(0.587f, rgb.y, 0.299f * rgb.x));
		return make_float3(fmaf(l, n.a0, n.b0), 0.f, 0.f);
	}
	if (fl & F_BGR) { float t = rgb.x; rgb.x = rgb.z; rgb.z = t; }
	return make_float3(fmaf(rgb.x, n.a0, n.b0), fmaf(rgb.y, n.a1, n.b1), fmaf(rgb.z, n.a2, n.b2));
}

// put writes output pixel (ox, oy)'s values.
__device__ __forceinline__ void put(void* __restrict__ dst, int W, int H, int C, int fl, int ox, int oy, float3 v) {
	size_t plane = (size_t)W * H, px = (size_t)oy * W + ox;
	if (C == 1) {
		store(dst, px, v.x, fl);
	} else if (fl & F_NHWC) {
		store(dst, px * 3, v.x, fl); store(dst, px * 3 + 1, v.y, fl); store(dst, px * 3 + 2, v.z, fl);
	} else {
		store(dst, px, v.x, fl); store(dst, plane + px, v.y, fl); store(dst, 2 * plane + px, v.z, fl);
	}
}

// The grey of the letterbox bands, as RGB.
__device__ __forceinline__ float3 padRGB() { return make_float3(114.f, 114.f, 114.f); }

// pre computes output pixel (ox, oy): padding, or the image sampled with
// the filter the flags say.
template <class P>
__device__ __forceinline__ void pre(const u8* __restrict__ src, int stride, int sw, int sh,
	void* __restrict__ dst, int W, int H, int C, int fl,
	int x0, int y0, int iw, int ih, float rx, float ry,
	const Norm& n, const Yuv& k, int ox, int oy)
{
	float3 rgb;
	int ix = ox - x0, iy = oy - y0;
	if (ix < 0 || iy < 0 || ix >= iw || iy >= ih) rgb = padRGB();
	else if (!(fl & (F_AREAX | F_AREAY))) rgb = bilinear<P>(src, stride, sw, sh, ix, iy, rx, ry, k, fl);
	else rgb = area<P>(src, stride, sw, sh, ix, iy, rx, ry, k, fl);
	put(dst, W, H, C, fl, ox, oy, finish(rgb, C, fl, n));
}

// One thread per output pixel. Measured slower on the H200 (4K → 640
// letterbox; docs/PERFORMANCE.md): four or two output rows per thread,
// and threads over the image area that also write a share of the padding.
#define KERNEL(NAME, P) \
extern "C" __global__ void __launch_bounds__(256) NAME(const u8* __restrict__ src, int stride, int sw, int sh, \
	void* __restrict__ dst, int W, int H, int C, int fl, \
	int x0, int y0, int iw, int ih, float rx, float ry, \
	float a0, float a1, float a2, float b0, float b1, float b2, \
	float yoff, float ygain, float rv, float gu, float gv, float bu) { \
	int ox = blockIdx.x * blockDim.x + threadIdx.x; \
	int oy = blockIdx.y * blockDim.y + threadIdx.y; \
	if (ox >= W || oy >= H) return; \
	Yuv k = {yoff, ygain, rv, gu, gv, bu}; \
	Norm n = {a0, a1, a2, b0, b1, b2}; \
	pre<P>(src, stride, sw, sh, dst, W, H, C, fl, x0, y0, iw, ih, rx, ry, n, k, ox, oy); \
}

// One frame of a batch: where it is, its geometry and flags, and the
// entry of the batched tensor it fills. 64 bytes; GPU.RunBatch writes it.
struct Desc {
	const u8* src;
	int stride, sw, sh, fl;
	int x0, y0, iw, ih;
	float rx, ry;
	int entry, pad0, pad1, pad2;
};

// BKERNEL: the _batch_area kernels (the area code makes tiles slower).
#define BKERNEL(NAME, P) \
extern "C" __global__ void __launch_bounds__(256) NAME(const Desc* __restrict__ desc, \
	void* __restrict__ dst, int W, int H, int C, \
	float a0, float a1, float a2, float b0, float b1, float b2, \
	float yoff, float ygain, float rv, float gu, float gv, float bu) { \
	int ox = blockIdx.x * blockDim.x + threadIdx.x; \
	int oy = blockIdx.y * blockDim.y + threadIdx.y; \
	if (ox >= W || oy >= H) return; \
	const Desc d = desc[blockIdx.z]; \
	size_t esz = (d.fl & F_HALF) ? 2 : 4; \
	void* out = (u8*)dst + (size_t)d.entry * C * W * H * esz; \
	Yuv k = {yoff, ygain, rv, gu, gv, bu}; \
	Norm n = {a0, a1, a2, b0, b1, b2}; \
	pre<P>(d.src, d.stride, d.sw, d.sh, out, W, H, C, d.fl, d.x0, d.y0, d.iw, d.ih, d.rx, d.ry, n, k, ox, oy); \
}

// Stores of n consecutive values of one plane at element i (i a multiple
// of n): one 2·n- or 4·n-byte store where the hardware has one.
__device__ __forceinline__ u16 half16(float v) {
	u16 h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
	return h;
}
template <int N>
__device__ __forceinline__ void storeN(void* __restrict__ dst, size_t i, const float* v, int fl) {
	if (fl & F_HALF) {
		u32 w[(N + 1) / 2];
		#pragma unroll
		for (int j = 0; j < N; j += 2) w[j / 2] = (u32)half16(v[j]) | (N > 1 ? (u32)half16(v[j + 1]) << 16 : 0u);
		if (N == 1) ((u16*)dst)[i] = (u16)w[0];
		else if (N == 2) ((u32*)dst)[i / 2] = w[0];
		else if (N == 4) ((uint2*)dst)[i / 4] = make_uint2(w[0], w[1]);
		else {
			#pragma unroll
			for (int j = 0; j < N / 8; j++) ((uint4*)dst)[i / 8 + j] = make_uint4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
		}
	} else {
		if (N == 1) ((float*)dst)[i] = v[0];
		else if (N == 2) ((float2*)dst)[i / 2] = make_float2(v[0], v[1]);
		else {
			#pragma unroll
			for (int j = 0; j < N / 4; j++) ((float4*)dst)[i / 4 + j] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
		}
	}
}

// putN writes the values v[0..N) of output pixels (ox .. ox+N−1, oy),
// those < W: vector stores into each plane where the layout allows (NCHW,
// W a multiple of N and an aligned tensor, so every run starts aligned),
// else pixel by pixel.
template <int N>
__device__ __forceinline__ void putN(void* __restrict__ dst, int W, int H, int C, int fl, int ox, int oy, const float3* v) {
	if (!(fl & F_NHWC) && W % N == 0 && ((size_t)dst & (N * ((fl & F_HALF) ? 2 : 4) - 1)) == 0) {
		size_t plane = (size_t)W * H, px = (size_t)oy * W + ox;
		float c[N];
		#pragma unroll
		for (int j = 0; j < N; j++) c[j] = v[j].x;
		storeN<N>(dst, px, c, fl);
		if (C == 1) return;
		#pragma unroll
		for (int j = 0; j < N; j++) c[j] = v[j].y;
		storeN<N>(dst, plane + px, c, fl);
		#pragma unroll
		for (int j = 0; j < N; j++) c[j] = v[j].z;
		storeN<N>(dst, 2 * plane + px, c, fl);
		return;
	}
	#pragma unroll
	for (int j = 0; j < N; j++)
		if (ox + j < W) put(dst, W, H, C, fl, ox + j, oy, v[j]);
}

// tiles: the batch kernels' work for frame d, in blocks of 32 × BY
// threads. Blocks [0, ni) cover the output rows that hold image pixels
// (NX adjacent pixels a thread; the letterbox columns left and right of
// the image are written there without sampling), blocks [ni, ni + np) the
// rows above and below the image (padding only, PADW pixels a thread, no
// sampling). ILV: a thread's NX pixels are 32 apart (a warp's loads and
// stores as with one pixel a thread), else adjacent (vector stores). The grid covers at least ni + np blocks of every frame (a
// grid-stride loop when it is smaller). AREA = false: the filter is
// bilinear along both axes for every frame of the launch (the kernel has
// no area code, so fewer registers). Per pixel it computes exactly what
// pre does.
template <class P, int NX, int PADW, int BY, bool AREA, bool ILV>
__device__ __forceinline__ void tiles(const Desc* __restrict__ desc, void* __restrict__ dst, int W, int H, int C,
	const Norm& n, const Yuv& k)
{
	const Desc d = desc[blockIdx.y];
	size_t esz = (d.fl & F_HALF) ? 2 : 4;
	void* out = (u8*)dst + (size_t)d.entry * C * W * H * esz;
	int r0 = d.y0, rows = d.ih;
	int txi = (W + 32 * NX - 1) / (32 * NX), ni = txi * ((rows + BY - 1) / BY);
	int txp = (W + 32 * PADW - 1) / (32 * PADW), np = txp * ((H - rows + BY - 1) / BY);
	for (int b = blockIdx.x; b < ni + np; b += gridDim.x) {
		if (b < ni) {
			int ty = b / txi, tx = b - ty * txi;
			int oy = r0 + ty * BY + threadIdx.y;
			int ox = ILV ? tx * 32 * NX + threadIdx.x : (tx * 32 + threadIdx.x) * NX;
			if (oy >= r0 + rows || ox >= W) continue;
			float3 v[NX];
			#pragma unroll
			for (int j = 0; j < NX; j++) {
				int ix = min(ILV ? ox + 32 * j : ox + j, W - 1) - d.x0, iy = oy - d.y0;
				float3 rgb;
				if (ix < 0 || iy < 0 || ix >= d.iw || iy >= d.ih) rgb = padRGB();
				else if (!AREA || !(d.fl & (F_AREAX | F_AREAY))) rgb = bilinear<P>(d.src, d.stride, d.sw, d.sh, ix, iy, d.rx, d.ry, k, d.fl);
				else rgb = area<P>(d.src, d.stride, d.sw, d.sh, ix, iy, d.rx, d.ry, k, d.fl);
				v[j] = finish(rgb, C, d.fl, n);
			}
			if (ILV) {
				#pragma unroll
				for (int j = 0; j < NX; j++)
					if (ox + 32 * j < W) put(out, W, H, C, d.fl, ox + 32 * j, oy, v[j]);
			} else {
				putN<NX>(out, W, H, C, d.fl, ox, oy, v);
			}
		} else {
			int q = b - ni, ty = q / txp, tx = q - ty * txp;
			int pr = ty * BY + threadIdx.y, ox = (tx * 32 + threadIdx.x) * PADW;
			if (pr >= H - rows || ox >= W) continue;
			float3 v[PADW];
			float3 g = finish(padRGB(), C, d.fl, n);
			#pragma unroll
			for (int j = 0; j < PADW; j++) v[j] = g;
			putN<PADW>(out, W, H, C, d.fl, ox, pr < r0 ? pr : pr + rows, v);
		}
	}
}

// BATCH is the product's batch kernel for the bilinear filter: tiles of
// 2 pixels a thread in the image rows, 8 in the padding rows, 32×8-thread
// blocks, registers capped for 8 blocks per SM (32 a thread: full
// occupancy on an H200; where 2048 threads do not fit an SM the cap is
// ignored). Measured against other shapes in docs/PERFORMANCE.md ("GPU
// preprocessing of a batch"); productBatch (gpu_batch.go) is its shape.
#define BATCH(NAME, P) \
extern "C" __global__ void __launch_bounds__(256, 8) NAME(TARGS) { TBODY(P, 2, 8, 8, false, false) }
#define TARGS const Desc* __restrict__ desc, void* __restrict__ dst, int W, int H, int C, \
	float a0, float a1, float a2, float b0, float b1, float b2, \
	float yoff, float ygain, float rv, float gu, float gv, float bu
#define TBODY(P, NX, PADW, BY, AREA, ILV) \
	Yuv k = {yoff, ygain, rv, gu, gv, bu}; \
	Norm n = {a0, a1, a2, b0, b1, b2}; \
	tiles<P, NX, PADW, BY, AREA, ILV>(desc, dst, W, H, C, n, k);

KERNEL(edged_pre_yuyv, YUYV)
KERNEL(edged_pre_uyvy, UYVY)
KERNEL(edged_pre_nv12, NV12)
KERNEL(edged_pre_grey, GREY)
KERNEL(edged_pre_rgb24, RGB24)
KERNEL(edged_pre_bgr24, BGR24)
BATCH(edged_pre_yuyv_batch, YUYV)
BATCH(edged_pre_uyvy_batch, UYVY)
BATCH(edged_pre_nv12_batch, NV12)
BATCH(edged_pre_grey_batch, GREY)
BATCH(edged_pre_rgb24_batch, RGB24)
BATCH(edged_pre_bgr24_batch, BGR24)
BKERNEL(edged_pre_yuyv_batch_area, YUYV)
BKERNEL(edged_pre_uyvy_batch_area, UYVY)
BKERNEL(edged_pre_nv12_batch_area, NV12)
BKERNEL(edged_pre_grey_batch_area, GREY)
BKERNEL(edged_pre_rgb24_batch_area, RGB24)
BKERNEL(edged_pre_bgr24_batch_area, BGR24)
`
