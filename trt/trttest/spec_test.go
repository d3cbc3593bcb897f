package trttest_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/trttest"
)

func TestSpecRoundTrip(t *testing.T) {
	for _, s := range []trttest.Spec{
		{Value: 1.5},
		{Value: -2, NaN: true, Inf: true, VersionError: true, InferError: true, ShortOutput: true, Reshape: true,
			LoadError: "Magic tag does not match", Delay: 20 * time.Millisecond, Pad: 100,
			Inputs:  []trt.TensorSpec{{Name: "images", Type: trt.Uint8, Shape: []int64{1, -1, 3}}},
			Outputs: []trt.TensorSpec{{Name: "a", Type: trt.Float16, Shape: []int64{7}}, {Name: "b", Type: trt.Int64, Shape: []int64{1, 2}}}},
	} {
		got, err := trttest.Parse(s.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		want := s
		if len(want.Inputs) == 0 {
			want.Inputs, want.Outputs = trttest.DefaultInputs, trttest.DefaultOutputs
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(Bytes(%+v)) = %+v", want, got)
		}
	}
}

func TestParseRejects(t *testing.T) {
	full := trttest.Spec{Value: 1}.Bytes()
	for name, b := range map[string][]byte{
		"empty":     {},
		"truncated": full[:len(full)-2],
		"magic":     []byte("something else\nvalue 1\nend\n"),
		"unknown":   []byte(trttest.Header + "\nvalue 1\nfrobnicate\nend\n"),
		"no value":  []byte(trttest.Header + "\nend\n"),
		"bad dim":   []byte(trttest.Header + "\nin x float32 1,0\nout y float32 1\nvalue 1\nend\n"),
		"huge":      []byte(trttest.Header + "\nin x float32 100000,100000\nout y float32 1\nvalue 1\nend\n"),
		"only in":   []byte(trttest.Header + "\nin x float32 1\nvalue 1\nend\n"),
	} {
		if _, err := trttest.Parse(b); !errors.Is(err, trt.ErrEngineInvalid) {
			t.Errorf("%s: err %v, want ErrEngineInvalid", name, err)
		}
	}
}

func TestBackend(t *testing.T) {
	b := trttest.NewBackend()
	ctx := context.Background()
	e, err := b.Load(ctx, trttest.Spec{Value: 3, NaN: true}.Bytes(), trt.LoadOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Live() != 1 || b.Loads() != 1 {
		t.Fatalf("live %d loads %d", b.Live(), b.Loads())
	}
	if err := e.Infer(ctx); err != nil {
		t.Fatal(err)
	}
	out := e.Outputs()[0].Float32()
	if !math.IsNaN(float64(out[0])) || out[1] != 3 {
		t.Fatalf("outputs %v", out)
	}
	e.Close()
	e.Close()
	if err := e.Infer(ctx); !errors.Is(err, trt.ErrClosed) {
		t.Fatalf("Infer after Close: %v", err)
	}
	if uac, _, _ := b.Misuse(); uac != 1 || b.Live() != 0 {
		t.Fatalf("use after close %d, live %d", uac, b.Live())
	}
	if _, err := b.Load(ctx, trttest.Spec{VersionError: true}.Bytes(), trt.LoadOptions{}); !errors.Is(err, trt.ErrVersion) {
		t.Fatalf("version error: %v", err)
	}
	if _, err := b.Load(ctx, trttest.Spec{LoadError: "x"}.Bytes(), trt.LoadOptions{}); !errors.Is(err, trt.ErrEngineInvalid) {
		t.Fatalf("load error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Load(cctx, trttest.Spec{Delay: time.Minute}.Bytes(), trt.LoadOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled delay: %v", err)
	}
	dyn := trttest.Spec{Inputs: []trt.TensorSpec{{Name: "x", Type: trt.Float32, Shape: []int64{1, -1}}}, Outputs: trttest.DefaultOutputs}
	if _, err := b.Load(ctx, dyn.Bytes(), trt.LoadOptions{}); err == nil {
		t.Fatal("dynamic input without Shapes loaded")
	}
	e, err = b.Load(ctx, dyn.Bytes(), trt.LoadOptions{Shapes: map[string][]int64{"x": {1, 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Inputs()[0].Elements(); got != 5 {
		t.Fatalf("resolved input has %d elements", got)
	}
	e.Close()
	if b.Live() != 0 || b.MaxLive() != 1 {
		t.Fatalf("live %d max %d", b.Live(), b.MaxLive())
	}
}

func FuzzParse(f *testing.F) {
	f.Add(trttest.Spec{Value: 1}.Bytes())
	f.Add(trttest.Spec{Value: 2, NaN: true, Delay: time.Millisecond, LoadError: "bad", Pad: 3}.Bytes())
	f.Add([]byte(trttest.Header + "\nin x uint8 1,-1\nout y int64 2\nvalue 1\nend\n"))
	f.Add([]byte("end\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := trttest.Parse(b)
		if err != nil {
			if !errors.Is(err, trt.ErrEngineInvalid) {
				t.Fatalf("error %v does not wrap ErrEngineInvalid", err)
			}
			return
		}
		// What parses renders to something that parses to the same spec.
		s2, err := trttest.Parse(s.Bytes())
		if err != nil {
			t.Fatalf("re-parse of %q: %v", s.Bytes(), err)
		}
		if math.Float32bits(s.Value) != math.Float32bits(s2.Value) {
			t.Fatalf("value %v became %v", s.Value, s2.Value)
		}
		s.Value, s2.Value = 0, 0
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("%+v became %+v", s, s2)
		}
	})
}
