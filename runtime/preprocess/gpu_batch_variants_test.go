package preprocess

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// Launch shapes of the tiles batch kernels (kernelSource) that the batch
// benchmark compares with the product's, for YUYV: every one must write
// what Run writes, byte for byte (TestGPUBatchVariantsParity).

// batchVariant is one instantiation of the tiles kernel.
type batchVariant struct {
	name   string
	reader string // the pixel reader: YUYV; YUYVM: bytes to floats without I2F; YUYVP: one load for both taps in a word; YUYVPM both
	shape  batchShape
	area   bool // the kernel has the area code (else bilinear-only launches)
	ilv    bool // a thread's pixels 32 apart (else adjacent)
	minb   int  // __launch_bounds__' minimum blocks per SM (0: none)
}

func (v batchVariant) kernelName() string {
	return "edged_v_" + strings.NewReplacer("-", "_", "x", "_").Replace(v.name)
}

var batchVariants = func() []batchVariant {
	var vs []batchVariant
	add := func(reader string, nx, padw, by, perSM int, area bool, minb int) {
		ilv := false
		if strings.HasPrefix(reader, "ilv:") {
			ilv, reader = true, reader[4:]
		}
		name := fmt.Sprintf("nx%d-pad%d-32x%d", nx, padw, by)
		if ilv {
			name += "-ilv"
		}
		switch reader {
		case "YUYVM":
			name += "-magic"
		case "YUYVP":
			name += "-pair"
		case "YUYVPM":
			name += "-pair-magic"
		}
		if perSM > 0 {
			name += fmt.Sprintf("-persm%d", perSM)
		}
		if minb > 0 {
			name += fmt.Sprintf("-minb%d", minb)
		}
		if area {
			name += "-area"
		}
		vs = append(vs, batchVariant{name: name, reader: reader, shape: batchShape{NX: nx, PadW: padw, BY: by, PerSM: perSM}, area: area, ilv: ilv, minb: minb})
	}
	// Run 1 (docs/PERFORMANCE.md): one pixel a thread without the area
	// code, then fewer blocks: padding rows 8 pixels a thread, image rows
	// 2 or 4 pixels a thread, block heights, grid-stride, a thread's pixels
	// 32 apart, bytes to floats without I2F, one load for both taps.
	add("YUYV", 1, 1, 8, 0, false, 0)
	add("YUYV", 1, 8, 8, 0, false, 0)
	add("YUYV", 2, 8, 8, 0, false, 0)
	add("YUYV", 4, 8, 8, 0, false, 0)
	add("YUYV", 2, 8, 4, 0, false, 0)
	add("YUYV", 4, 8, 4, 0, false, 0)
	add("YUYV", 2, 8, 8, 4, false, 0)
	add("ilv:YUYV", 2, 8, 8, 0, false, 0)
	add("YUYVM", 2, 8, 8, 0, false, 0)
	add("YUYVP", 2, 8, 8, 0, false, 0)
	// Registers capped (32 a thread at 8 × 256 or 16 × 128 threads per SM,
	// 40 at 6 × 256): the product is nx2-pad8-32x8-minb8.
	add("YUYV", 1, 8, 8, 0, false, 8)
	add("YUYV", 2, 8, 8, 0, false, 8)
	add("YUYVM", 2, 8, 8, 0, false, 8)
	add("YUYVP", 2, 8, 8, 0, false, 8)
	add("YUYVPM", 2, 8, 8, 0, false, 8)
	add("YUYV", 2, 8, 8, 8, false, 8)
	add("YUYVP", 2, 8, 8, 8, false, 8)
	add("YUYV", 4, 8, 8, 0, false, 8)
	add("YUYVM", 4, 8, 8, 0, false, 8)
	add("YUYV", 2, 8, 4, 0, false, 16)
	add("YUYV", 4, 8, 4, 0, false, 16)
	add("YUYV", 2, 8, 8, 0, false, 6)
	add("YUYV", 4, 8, 8, 0, false, 6)
	add("YUYVP", 4, 8, 8, 0, false, 6)
	// With the area code (what the area filter needs; also bilinear).
	add("YUYV", 2, 8, 8, 0, true, 0)
	add("YUYVM", 2, 8, 8, 0, true, 0)
	add("YUYV", 1, 8, 8, 0, true, 8)
	add("YUYV", 2, 8, 8, 0, true, 8)
	add("YUYV", 2, 8, 8, 0, true, 6)
	add("YUYVM", 2, 8, 8, 0, true, 6)
	return vs
}()

// batchVariantSource is kernelSource with the variants instantiated.
func batchVariantSource(vs []batchVariant) string {
	var b strings.Builder
	b.WriteString(kernelSource)
	b.WriteString(`
__device__ __forceinline__ float byteF(u32 w, u32 i) {
	return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | i)) - 8388608.f;
}
template <int M> __device__ __forceinline__ float cvb(u32 w, u32 i) { return M ? byteF(w, i) : (float)((w >> (8 * i)) & 0xff); }
template <int M> struct YUYVt {
	__device__ static float3 at(const u8* s, int stride, int h, int x, int y, const Yuv& k, int fl) {
		const u8* p = s + (size_t)y * stride + 4 * (x >> 1);
		if (fl & F_ALIGN) {
			u32 w = __ldg((const u32*)p);
			return yuv2rgb(cvb<M>(w, (x & 1) << 1), cvb<M>(w, 1), cvb<M>(w, 3), k);
		}
		return yuv2rgb((float)p[2 * (x & 1)], (float)p[1], (float)p[3], k);
	}
};
typedef YUYVt<1> YUYVM;
template <int M> struct YUYVPt : YUYVt<M> {};
template <int M> struct Pair<YUYVPt<M> > {
	__device__ static __forceinline__ void at(const u8* s, int stride, int h, int xa, int xb, int y, const Yuv& k, int fl,
		float3& a, float3& b) {
		if (!(fl & F_ALIGN)) {
			a = YUYVt<M>::at(s, stride, h, xa, y, k, fl);
			b = YUYVt<M>::at(s, stride, h, xb, y, k, fl);
			return;
		}
		const u8* row = s + (size_t)y * stride;
		u32 wa = __ldg((const u32*)(row + 4 * (xa >> 1)));
		u32 wb = (xa >> 1) == (xb >> 1) ? wa : __ldg((const u32*)(row + 4 * (xb >> 1)));
		a = yuv2rgb(cvb<M>(wa, (xa & 1) << 1), cvb<M>(wa, 1), cvb<M>(wa, 3), k);
		b = yuv2rgb(cvb<M>(wb, (xb & 1) << 1), cvb<M>(wb, 1), cvb<M>(wb, 3), k);
	}
};
typedef YUYVPt<0> YUYVP;
typedef YUYVPt<1> YUYVPM;
`)
	for _, v := range vs {
		lb := fmt.Sprint(32 * v.shape.BY)
		if v.minb > 0 {
			lb += fmt.Sprintf(", %d", v.minb)
		}
		fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(%s) %s(TARGS) { TBODY(%s, %d, %d, %d, %v, %v) }\n",
			lb, v.kernelName(), v.reader, v.shape.NX, v.shape.PadW, v.shape.BY, v.area, v.ilv)
	}
	return b.String()
}

// batchVariantKernel is a variant loaded on a device.
type batchVariantKernel struct {
	batchVariant
	batchKernel
}

// loadBatchVariants compiles the variants for g's device. With
// EDGED_PTX_DIR set it writes their PTX there (for ptxas -v: registers).
func loadBatchVariants(t testing.TB, g *GPU) []batchVariantKernel {
	t.Helper()
	d := g.k.device
	ptx, err := d.Compile(batchVariantSource(batchVariants), umem.CompileOptions{Name: "edged_batch_variants.cu",
		CacheDir: gpuCacheDir, Library: os.Getenv("EDGED_NVRTC_LIB")})
	if err != nil {
		t.Fatalf("compiling the batch variants: %v", err)
	}
	if dir := os.Getenv("EDGED_PTX_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "batch_variants.ptx"), ptx.Code, 0o644); err != nil {
			t.Error(err)
		}
	}
	mod, err := d.LoadModule(ptx.Code)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	var ks []batchVariantKernel
	for _, v := range batchVariants {
		fn, err := mod.Kernel(v.kernelName())
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, batchVariantKernel{v, batchKernel{fn: fn, shape: v.shape}})
	}
	return ks
}

// Every variant the batch benchmark times writes, for the YUYV frames of
// the parity batch, exactly what Run writes for each frame alone.
func TestGPUBatchVariantsParity(t *testing.T) {
	p := gpuPlacement(t, umem.Options{Strategy: umem.StrategyPinned})
	g := newGPU(t, p, Options{Out: Output{C: 3, H: 32, W: 32}}, 0, ReadCopy)
	for _, v := range loadBatchVariants(t, g) {
		t.Run(v.name, func(t *testing.T) {
			batchParity(t, p, ReadCopy, map[sensors.PixelFormat]batchVariantKernel{sensors.YUYV: v}, false)
		})
	}
}
