package preprocess

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/edged-dev/edged/sensors"
)

// TestColBlockLayout: the vector kernel (fused_amd64.s) addresses
// colBlock and simdConsts by these offsets.
func TestColBlockLayout(t *testing.T) {
	var b colBlock
	var k simdConsts
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"colBlock.oc0", unsafe.Offsetof(b.oc0), 32},
		{"colBlock.sv0", unsafe.Offsetof(b.sv0), 128},
		{"colBlock.o1", unsafe.Offsetof(b.o1), 160},
		{"colBlock.sv1", unsafe.Offsetof(b.sv1), 288},
		{"colBlock.w", unsafe.Offsetof(b.w), 320},
		{"colBlock size", unsafe.Sizeof(b), 352},
		{"simdConsts.kb", unsafe.Offsetof(k.kb), 96},
		{"simdConsts.bu", unsafe.Offsetof(k.bu), 224},
		{"simdConsts.m255", unsafe.Offsetof(k.m255), 320},
		{"simdConsts.c0", unsafe.Offsetof(k.c0), 352},
		{"simdConsts.c1", unsafe.Offsetof(k.c1), 448},
		{"simdConsts.bias", unsafe.Offsetof(k.bias), 544},
		{"simdConsts.fix", unsafe.Offsetof(k.fix), 640},
		{"simdConsts.perm", unsafe.Offsetof(k.perm), 672},
		{"simdConsts.unperm", unsafe.Offsetof(k.unperm), 768},
		{"simdConsts.fix8", unsafe.Offsetof(k.fix8), 864},
		{"simdConsts.last7", unsafe.Offsetof(k.last7), 896},
		{"simdConsts size", unsafe.Sizeof(k), 928},
		{"lineBlock size", unsafe.Sizeof(lineBlock{}), 160},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d, the kernel expects %d", c.name, c.got, c.want)
		}
	}
}

// TestVectorMatchesPortable: the vector kernels write what the portable
// passes write, within the portable fixed-point rounding (1/256 of a level
// per converted value, 1/16384 per weight: under 0.02 of an 8-bit step),
// on every YUV format, on full blocks of eight columns and on the columns
// after them: the fused pass (4K: TestParity4KLetterboxHalf), and the
// horizontal pass where output rows share source rows (a mild downscale,
// 1:1, an upscale).
func TestVectorMatchesPortable(t *testing.T) {
	if !haveSIMD {
		t.Skip("no vector kernel on this machine")
	}
	type size struct{ w, h, ow, oh, stride int }
	sizes := []size{{1920, 1080, 224, 224, 0}, {642, 481, 203, 160, 10}, {641, 480, 17, 100, 3}, {9, 9, 9, 4, 1},
		{640, 480, 416, 416, 0}, {960, 540, 640, 360, 0}, {640, 480, 640, 640, 0}, {321, 240, 650, 481, 5}}
	for _, s := range sizes {
		for _, pf := range yuvFormats {
			f := sensors.Format{Width: s.w, Height: s.h, Pixel: pf}
			if s.stride > 0 {
				f.Stride = pf.PackedLine(s.w+1) + s.stride
			}
			src := noise(f, uint64(s.w)+uint64(pf))
			for i, v := range variants {
				if v.Out.C != 3 {
					continue
				}
				o := v
				o.Resize, o.Out.W, o.Out.H, o.Threads = Letterbox, s.ow, s.oh, 1+i%2
				if i%2 == 0 {
					o.Resize = Stretch
				}
				if i == 3 {
					o.Filter = Area // the row kernel, where the image shrinks
				}
				vec, port, blocks, want := bothKernels(t, o, src, f)
				if blocks != want {
					t.Fatalf("%s %s: %d blocks, want %d", f, variantName(o), blocks, want)
				}
				compareOutputs(t, fmt.Sprintf("%s %s vector against portable", f, variantName(o)), o, vec, port, 0.02)
			}
		}
	}
}

// bothKernels runs one frame through a Preprocessor with the vector
// kernels and through one without, and returns both outputs, the vector
// plan's blocks of eight output columns (2-tap columns) or of eight pixels
// of a line (area footprints), and the number of those the plan should
// have: every full group of eight.
func bothKernels(t *testing.T, o Options, src []byte, f sensors.Format) (vec, port []byte, blocks, want int) {
	t.Helper()
	for _, on := range []bool{true, false} {
		setSIMD(t, on)
		p, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, o.Out.Bytes())
		if _, err := p.Run(src, f, out); err != nil {
			t.Fatalf("%s %s: %v", f, variantName(o), err)
		}
		if on {
			vec, blocks = out, len(p.plan.simd)+len(p.plan.lines)
			want = p.plan.iw / 8
			if p.plan.x2 == nil {
				want = f.Width / 8
			}
		} else {
			port = out
			if len(p.plan.simd)+len(p.plan.lines) != 0 {
				t.Fatalf("%s %s: vector blocks with the vector kernels off", f, variantName(o))
			}
		}
		p.Close()
	}
	return vec, port, blocks, want
}
