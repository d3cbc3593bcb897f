// v3: v1's launch shape (image threads NX adjacent pixels, padding threads 8)
// with the conversion scaled to [0, 1] so the clamp is the FMA's saturate.
struct Yuv3 { float yg, kr, kg, kb, rv, ngu, ngv, bu; };  // all / 255

__device__ __forceinline__ float3 conv3(float Y, float U, float V, const Yuv3& k) {
	float r = __saturatef(fmaf(Y, k.yg, fmaf(V, k.rv, k.kr)));
	float g = __saturatef(fmaf(Y, k.yg, fmaf(U, k.ngu, fmaf(V, k.ngv, k.kg))));
	float b = __saturatef(fmaf(Y, k.yg, fmaf(U, k.bu, k.kb)));
	return make_float3(r, g, b);
}

struct YUYV3 {
	__device__ static float3 at(const u8* row, int x, const Yuv3& k, int fl) {
		const u8* p = row + 4 * (x >> 1);
		if (fl & F_ALIGN) {
			u32 w = __ldg((const u32*)p);
			float Y = (float)((x & 1) ? (w >> 16) & 0xff : w & 0xff);
			return conv3(Y, (float)((w >> 8) & 0xff), (float)(w >> 24), k);
		}
		return conv3((float)p[2 * (x & 1)], (float)p[1], (float)p[3], k);
	}
};

template <class P, int NX>
__device__ __forceinline__ void image3(const u8* __restrict__ src, int stride, int sw, int sh,
	void* __restrict__ dst, int W, int H, int fl, int x0, int y0, int iw, int ih, float rx, float ry,
	float a0, float a1, float a2, float b0, float b1, float b2, const Yuv3& k, int ix0, int iy)
{
	int ya, yb;
	float wy;
	linear(iy, ry, sh, ya, yb, wy);
	const u8* ra = src + (size_t)ya * stride;
	const u8* rb = src + (size_t)yb * stride;
	float3 v[NX];
	#pragma unroll
	for (int j = 0; j < NX; j++) {
		int ix = min(ix0 + j, iw - 1);
		int xa, xb;
		float wx;
		linear(ix, rx, sw, xa, xb, wx);
		float3 p00 = P::at(ra, xa, k, fl), p01 = P::at(ra, xb, k, fl);
		float3 p10 = P::at(rb, xa, k, fl), p11 = P::at(rb, xb, k, fl);
		float3 t = fma3(wx, make_float3(p01.x - p00.x, p01.y - p00.y, p01.z - p00.z), p00);
		float3 b = fma3(wx, make_float3(p11.x - p10.x, p11.y - p10.y, p11.z - p10.z), p10);
		float3 rgb = fma3(wy, make_float3(b.x - t.x, b.y - t.y, b.z - t.z), t);
		if (fl & F_BGR) { float q = rgb.x; rgb.x = rgb.z; rgb.z = q; }
		v[j] = make_float3(fmaf(rgb.x, a0, b0), fmaf(rgb.y, a1, b1), fmaf(rgb.z, a2, b2));
	}
	storeRun<NX>(dst, W, H, fl, x0, y0, iw, ix0, iy, v);
}

// a: the gains for RGB in [0, 255] (multiplied by 255 inside); pa: padding uses 114·a + b.
#define KERNEL4(NAME, P, NX, BY) \
extern "C" __global__ void __launch_bounds__(32 * BY) NAME(const u8* __restrict__ src, int stride, int sw, int sh, \
	void* __restrict__ dst, int W, int H, int C, int fl, \
	int x0, int y0, int iw, int ih, float rx, float ry, \
	float a0, float a1, float a2, float b0, float b1, float b2, \
	float yg, float kr, float kg, float kb, float rv, float ngu, float ngv, float bu, int gx, int nImg) { \
	int b = blockIdx.x; \
	if (b >= nImg) { \
		padding<8>(dst, W, H, fl, x0, y0, iw, ih, a0, a1, a2, b0, b1, b2, (b - nImg) * (32 * BY) + threadIdx.y * 32 + threadIdx.x); \
		return; \
	} \
	int ty = b / gx, tx = b - ty * gx; \
	int ix = (tx * 32 + threadIdx.x) * NX, iy = ty * BY + threadIdx.y; \
	if (ix >= iw || iy >= ih) return; \
	Yuv3 k = {yg, kr, kg, kb, rv, ngu, ngv, bu}; \
	image3<P, NX>(src, stride, sw, sh, dst, W, H, fl, x0, y0, iw, ih, rx, ry, 255.f * a0, 255.f * a1, 255.f * a2, b0, b1, b2, k, ix, iy); \
}
KERNEL4(v3_yuyv_nx1, YUYV3, 1, 8)
KERNEL4(v3_yuyv_nx2, YUYV3, 2, 8)
KERNEL4(v3_yuyv_nx4, YUYV3, 4, 8)
KERNEL4(v3_yuyv_nx2_by16, YUYV3, 2, 16)
KERNEL4(v3_yuyv_nx2_by32, YUYV3, 2, 32)
KERNEL4(v3_yuyv_nx2_by4, YUYV3, 2, 4)

// v5: one block of 1024 threads per SM at most: padding threads fill 32
// pixels of a row each, so image pairs and padding fit one thread each.
extern "C" __global__ void __launch_bounds__(1024) v5_yuyv(const u8* __restrict__ src, int stride, int sw, int sh,
	void* __restrict__ dst, int W, int H, int C, int fl,
	int x0, int y0, int iw, int ih, float rx, float ry,
	float a0, float a1, float a2, float b0, float b1, float b2,
	float yg, float kr, float kg, float kb, float rv, float ngu, float ngv, float bu, int gx, int nImg) {
	// 1-D: thread t < nImg is image pair (t % gx, t / gx); the rest pad.
	int t = blockIdx.x * 1024 + threadIdx.x;
	if (t >= nImg) {
		padding<32>(dst, W, H, fl, x0, y0, iw, ih, a0, a1, a2, b0, b1, b2, t - nImg);
		return;
	}
	int iy = t / gx, ix = (t - iy * gx) * 2;
	Yuv3 k = {yg, kr, kg, kb, rv, ngu, ngv, bu};
	image3<YUYV3, 2>(src, stride, sw, sh, dst, W, H, fl, x0, y0, iw, ih, rx, ry, 255.f * a0, 255.f * a1, 255.f * a2, b0, b1, b2, k, ix, iy);
}
