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
// The _batch kernels convert the frames of a batch in one launch: block
// z converts frame z of a table of descriptors (struct Desc, 64 bytes,
// written by GPU.RunBatch) into its entry of the batched tensor, with the
// same per-pixel function (pre) as the kernel of one frame.
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

template <class P>
__device__ __forceinline__ void pre(const u8* __restrict__ src, int stride, int sw, int sh,
	void* __restrict__ dst, int W, int H, int C, int fl,
	int x0, int y0, int iw, int ih, float rx, float ry,
	float a0, float a1, float a2, float b0, float b1, float b2,
	const Yuv& k, int ox, int oy)
{
	float3 rgb;
	int ix = ox - x0, iy = oy - y0;
	bool pad = ix < 0 || iy < 0 || ix >= iw || iy >= ih;
	if (pad) {
		rgb = make_float3(114.f, 114.f, 114.f);
	} else if (!(fl & (F_AREAX | F_AREAY))) {
		int xa, xb, ya, yb;
		float wx, wy;
		linear(ix, rx, sw, xa, xb, wx);
		linear(iy, ry, sh, ya, yb, wy);
		float3 p00 = P::at(src, stride, sh, xa, ya, k, fl), p01 = P::at(src, stride, sh, xb, ya, k, fl);
		float3 p10 = P::at(src, stride, sh, xa, yb, k, fl), p11 = P::at(src, stride, sh, xb, yb, k, fl);
		float3 t = fma3(wx, make_float3(p01.x - p00.x, p01.y - p00.y, p01.z - p00.z), p00);
		float3 b = fma3(wx, make_float3(p11.x - p10.x, p11.y - p10.y, p11.z - p10.z), p10);
		rgb = fma3(wy, make_float3(b.x - t.x, b.y - t.y, b.z - t.z), t);
	} else {
		// Separable: per axis either the area footprint [i·r, (i+1)·r) with
		// overlap weights / r, or the two bilinear taps.
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
		rgb = make_float3(0.f, 0.f, 0.f);
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
		rgb = make_float3(rgb.x / wsum, rgb.y / wsum, rgb.z / wsum);
	}
	size_t plane = (size_t)W * H, px = (size_t)oy * W + ox;
	if (C == 1) {
		float l = 0.299f * rgb.x + 0.587f * rgb.y + 0.114f * rgb.z;
		store(dst, px, fmaf(l, a0, b0), fl);
		return;
	}
	if (fl & F_BGR) { float t = rgb.x; rgb.x = rgb.z; rgb.z = t; }
	float v0 = fmaf(rgb.x, a0, b0), v1 = fmaf(rgb.y, a1, b1), v2 = fmaf(rgb.z, a2, b2);
	if (fl & F_NHWC) {
		store(dst, px * 3, v0, fl); store(dst, px * 3 + 1, v1, fl); store(dst, px * 3 + 2, v2, fl);
	} else {
		store(dst, px, v0, fl); store(dst, plane + px, v1, fl); store(dst, 2 * plane + px, v2, fl);
	}
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
	pre<P>(src, stride, sw, sh, dst, W, H, C, fl, x0, y0, iw, ih, rx, ry, a0, a1, a2, b0, b1, b2, k, ox, oy); \
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
	pre<P>(d.src, d.stride, d.sw, d.sh, out, W, H, C, d.fl, d.x0, d.y0, d.iw, d.ih, d.rx, d.ry, a0, a1, a2, b0, b1, b2, k, ox, oy); \
}

KERNEL(edged_pre_yuyv, YUYV)
KERNEL(edged_pre_uyvy, UYVY)
KERNEL(edged_pre_nv12, NV12)
KERNEL(edged_pre_grey, GREY)
KERNEL(edged_pre_rgb24, RGB24)
KERNEL(edged_pre_bgr24, BGR24)
BKERNEL(edged_pre_yuyv_batch, YUYV)
BKERNEL(edged_pre_uyvy_batch, UYVY)
BKERNEL(edged_pre_nv12_batch, NV12)
BKERNEL(edged_pre_grey_batch, GREY)
BKERNEL(edged_pre_rgb24_batch, RGB24)
BKERNEL(edged_pre_bgr24_batch, BGR24)
`
