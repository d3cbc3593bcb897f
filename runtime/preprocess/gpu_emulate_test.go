package preprocess

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// The batch kernels' tiling (which thread writes which pixel, the vector
// stores and their fallbacks, the grid-stride loop) checked without a GPU:
// kernelSource compiled as C++ by the host compiler, each CUDA thread run
// in turn. For YUYV frames of several sizes and strides and the tensors of
// the parity batch, every variant of the batch benchmark writes into its
// entry exactly what the one-frame kernel writes for the frame, and
// nothing outside it; so does the product's. Its shape in kernelSource is
// productBatch's. (The GPU's own result is TestGPUBatchVariantsParity.)
func TestBatchKernelsEmulated(t *testing.T) {
	if os.Getenv("EDGED_EXEC_WRAPPER") != "" {
		// Under qemu (make test-arm64) the g++ on PATH is the host's: the
		// emulation does not depend on this binary's architecture, and the
		// native run checks it.
		t.Skip("under an exec wrapper: the native test run emulates the kernels")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	frames := []sensors.Format{
		{Width: 322, Height: 242, Pixel: sensors.YUYV},
		{Width: 100, Height: 60, Pixel: sensors.YUYV, Stride: 236},
		{Width: 120, Height: 200, Pixel: sensors.YUYV},
		{Width: 98, Height: 61, Pixel: sensors.YUYV, Stride: 198}, // rows not 4-byte aligned
		{Width: 3840, Height: 2160, Pixel: sensors.YUYV},
	}
	opts := append([]Options{{Resize: Letterbox, Out: Output{C: 3, H: 640, W: 640, Half: true}},
		{Resize: Letterbox, Filter: Area, Out: Output{C: 3, H: 64, W: 64, Half: true}}}, batchParityOptions...)
	// The product's bilinear batch kernel, then the benchmark's variants.
	kernels := append([]batchVariant{{name: "product", shape: productBatch}}, batchVariants...)
	kname := func(i int) string {
		if i == 0 {
			return "edged_pre_yuyv_batch"
		}
		return kernels[i].kernelName()
	}
	var cases strings.Builder
	n := 0
	for _, o := range opts {
		g := &GPU{o: o, yuv: ColorCoeffs(o.Matrix, o.FullRange)}
		g.a, g.b = o.Affine()
		for _, f := range frames {
			if o.Out.W == 640 && f.Width != 3840 || f.Width == 3840 && o.Out.W != 640 {
				continue // 4K only into the benchmark's tensor
			}
			geo := g.batchGeometry(f)
			fl := g.flags(f, 0, &geo)
			iw, ih := geo.X1-geo.X0, geo.Y1-geo.Y0
			var grids []string
			for _, v := range kernels {
				x := 0
				if v.area || fl&(flAreaX|flAreaY) == 0 {
					grid, _ := v.shape.grid(o.Out, v.shape.blocks(o.Out, &geo), 1, 2)
					x = int(grid.X)
				}
				grids = append(grids, fmt.Sprint(x))
			}
			y := g.yuv
			fmt.Fprintf(&cases, "{%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%x,%x,{%x,%x,%x,%x,%x,%x},{%x,%x,%x,%x,%x,%x},{%s}},\n",
				f.Width, f.Height, f.LineBytes(), o.Out.W, o.Out.H, o.Out.C, fl, geo.X0, geo.Y0, iw, ih,
				float32(float64(f.Width)/float64(iw)), float32(float64(f.Height)/float64(ih)),
				g.a[0], g.a[1], g.a[2], g.b[0], g.b[1], g.b[2], y.YOff, y.YGain, y.RV, y.GU, y.GV, y.BU, strings.Join(grids, ","))
			n++
		}
	}
	var vars strings.Builder
	for i, v := range kernels {
		fmt.Fprintf(&vars, "{%q, %s, %d},\n", v.name, kname(i), v.shape.BY)
	}
	src := strings.ReplaceAll(batchVariantSource(batchVariants), `asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));`, "h = emuHalf(v);")
	if strings.Contains(src, "asm(") {
		t.Fatal("kernelSource has inline assembly the emulation does not replace")
	}
	prog := emuPrelude + src + fmt.Sprintf(emuMain, len(kernels), vars.String(), n, cases.String())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "emu.cc"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "emu")
	if out, err := exec.Command(cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-w", "-o", bin, filepath.Join(dir, "emu.cc")).CombinedOutput(); err != nil {
		t.Fatalf("compiling the emulation: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
	s := productBatch
	if want := fmt.Sprintf("__launch_bounds__(%d, 8) NAME(TARGS) { TBODY(P, %d, %d, %d, false, false) }", 32*s.BY, s.NX, s.PadW, s.BY); !strings.Contains(kernelSource, want) {
		t.Errorf("kernelSource's BATCH is not productBatch %+v: no %q", s, want)
	}
}

// emuPrelude is what the CUDA compiler provides, for the host compiler.
const emuPrelude = `#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <vector>
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
struct emuDim { unsigned x, y, z; };
static emuDim threadIdx, blockIdx, blockDim, gridDim;
struct float2 { float x, y; }; struct float3 { float x, y, z; }; struct float4 { float x, y, z, w; };
struct uint2 { unsigned x, y; }; struct uint4 { unsigned x, y, z, w; };
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline float3 make_float3(float a, float b, float c) { return {a, b, c}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
template <class T> static inline T __ldg(const T* p) { T v; memcpy(&v, p, sizeof v); return v; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
	unsigned long long x = (unsigned long long)b << 32 | a;
	unsigned r = 0;
	for (int i = 0; i < 4; i++) r |= (unsigned)((x >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
	return r;
}
static inline unsigned short emuHalf(float v) { _Float16 h = (_Float16)v; unsigned short u; memcpy(&u, &h, 2); return u; }
`

// emuMain runs the one-frame YUYV kernel and every variant over each case.
const emuMain = `
typedef void (*tilesFn)(const Desc*, void*, int, int, int, float, float, float, float, float, float,
	float, float, float, float, float, float);
struct Var { const char* name; tilesFn fn; int by; };
static Var vars[%d] = {
%s};
struct Case { int sw, sh, stride, W, H, C, fl, x0, y0, iw, ih; float rx, ry, n[6], y[6]; int grid[sizeof vars / sizeof vars[0]]; };
static Case cases[%d] = {
%s};

int main() {
	const int nv = sizeof vars / sizeof vars[0];
	int bad = 0, runs = 0;
	srand(1);
	for (const Case& c : cases) {
		std::vector<unsigned char> src((size_t)c.stride * c.sh + 4);
		for (auto& b : src) b = rand() & 0xff;
		size_t per = (size_t)c.C * c.W * c.H * ((c.fl & F_HALF) ? 2 : 4);
		std::vector<unsigned char> one(per), three(3 * per);
		blockDim = {32, 8, 1};
		gridDim = {(unsigned)(c.W + 31) / 32, (unsigned)(c.H + 7) / 8, 1};
		for (unsigned by = 0; by < gridDim.y; by++) for (unsigned bx = 0; bx < gridDim.x; bx++)
		for (unsigned ty = 0; ty < 8; ty++) for (unsigned tx = 0; tx < 32; tx++) {
			blockIdx = {bx, by, 0}; threadIdx = {tx, ty, 0};
			edged_pre_yuyv(src.data(), c.stride, c.sw, c.sh, one.data(), c.W, c.H, c.C, c.fl, c.x0, c.y0, c.iw, c.ih, c.rx, c.ry,
				c.n[0], c.n[1], c.n[2], c.n[3], c.n[4], c.n[5], c.y[0], c.y[1], c.y[2], c.y[3], c.y[4], c.y[5]);
		}
		Desc d = {src.data(), c.stride, c.sw, c.sh, c.fl, c.x0, c.y0, c.iw, c.ih, c.rx, c.ry, 1, 0, 0, 0};
		for (int v = 0; v < nv; v++) {
			if (c.grid[v] == 0) continue;
			memset(three.data(), 0xa5, three.size());
			blockDim = {32, (unsigned)vars[v].by, 1};
			gridDim = {(unsigned)c.grid[v], 1, 1};
			for (unsigned bx = 0; bx < gridDim.x; bx++)
			for (unsigned ty = 0; ty < blockDim.y; ty++) for (unsigned tx = 0; tx < 32; tx++) {
				blockIdx = {bx, 0, 0}; threadIdx = {tx, ty, 0};
				vars[v].fn(&d, three.data(), c.W, c.H, c.C, c.n[0], c.n[1], c.n[2], c.n[3], c.n[4], c.n[5],
					c.y[0], c.y[1], c.y[2], c.y[3], c.y[4], c.y[5]);
			}
			runs++;
			size_t at = per;
			for (size_t i = 0; i < per; i++) if (three[per + i] != one[i]) { at = i; break; }
			bool outside = false;
			for (size_t i = 0; i < per; i++) if (three[i] != 0xa5 || three[2 * per + i] != 0xa5) { outside = true; break; }
			if (at < per || outside) {
				bad++;
				printf("%%s: %%dx%%d stride %%d -> %%dx%%dx%%d flags %%d: ", vars[v].name, c.sw, c.sh, c.stride, c.C, c.H, c.W, c.fl);
				if (at < per) printf("first differing byte %%zu of %%zu; ", at, per);
				if (outside) printf("wrote outside its entry");
				printf("\n");
			}
		}
	}
	printf("%%d launches emulated, %%d differ\n", runs, bad);
	return bad != 0;
}
`
