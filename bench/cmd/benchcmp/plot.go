package main

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"github.com/edged-dev/edged/bench/internal/plot"
)

// The plot: one panel per frame size with a stacked bar of stage p50s for
// each side and input, and a panel of throughput at saturation (e2e) or
// pre p99 (pre mode).

var (
	black  = plot.Black
	grey   = plot.Grey
	colEdg = color.RGBA{31, 119, 180, 255}
	colPy  = color.RGBA{255, 127, 14, 255}
)

// segment is one part of a stacked bar.
type segment struct {
	key   string
	label string
	col   color.RGBA
}

var segments = []segment{
	{"fill", "fill (read frame)", color.RGBA{141, 160, 203, 255}},
	{"queue", "queue wait", color.RGBA{231, 138, 195, 255}},
	{"pre", "pre", color.RGBA{252, 141, 98, 255}},
	{"infer", "infer", color.RGBA{102, 194, 165, 255}},
	{"post", "post", color.RGBA{166, 216, 84, 255}},
	{"rest", "rest of total", color.RGBA{200, 200, 200, 255}},
	{"encode", "encode+send (after total)", color.RGBA{255, 217, 47, 255}},
}

// bar returns the p50 segments (µs) of one run, in segments order. In pre
// mode only pre is drawn: the rest is not compared.
func bar(r *RunResult, pre bool) map[string]float64 {
	out := map[string]float64{}
	if r == nil {
		return out
	}
	var sum float64
	for _, s := range segments {
		if pre && s.key != "pre" {
			continue
		}
		if d, ok := r.Stages[s.key]; ok && d.N > 0 {
			out[s.key] = d.P50
			if s.key != "encode" {
				sum += d.P50
			}
		}
	}
	if t, ok := r.Stages["total"]; ok && !pre && t.P50 > sum {
		out["rest"] = t.P50 - sum
	}
	return out
}

func barHeight(b map[string]float64) float64 {
	var h float64
	for _, v := range b {
		h += v
	}
	return h
}

func writePlot(path string, rep *Report) error {
	pre := rep.Mode == "pre"
	// Frame sizes in input order, and each size's comparisons.
	var sizes []string
	bySize := map[string][]*Comparison{}
	for _, c := range rep.Comparisons {
		var in Input
		for _, i := range rep.Inputs {
			if i.Name == c.Input {
				in = i
			}
		}
		s := fmt.Sprintf("%dx%d", in.Width, in.Height)
		if _, ok := bySize[s]; !ok {
			sizes = append(sizes, s)
		}
		bySize[s] = append(bySize[s], c)
	}
	nPanels := len(sizes) + 1
	const panelW, H = 430, 640
	W := max(nPanels*panelW+20, 900)
	img := plot.New(W, H)

	title := "edged vs Python loop (OpenCV + NumPy + onnxruntime): end to end"
	if pre {
		title = "edged vs Python loop (OpenCV + NumPy): preprocessing"
	}
	img.Text(W/2, 30, title, black, 2, 0)
	sub := fmt.Sprintf("%d CPUs %s", rep.System.NProc, rep.System.CPU)
	if rep.System.GPU != "" {
		sub += ", " + rep.System.GPU
	}
	sub += fmt.Sprintf(" | ORT threads %d | %s measured per run", rep.Threads, rep.Measure)
	img.Text(W/2, 52, sub, grey, 1, 0)

	top0, bottom := 70, H-110
	for i, s := range sizes {
		cs := bySize[s]
		var hmax float64
		for _, c := range cs {
			hmax = max(hmax, barHeight(bar(c.Latency, pre)), barHeight(bar(c.Python, pre)))
		}
		top, step := plot.NiceMax(hmax / 1000)
		what := "stage p50s, stacked"
		if pre {
			what = "pre p50"
		}
		area, ppu := img.Panel(10+i*panelW, top0, 10+(i+1)*panelW, bottom, fmt.Sprintf("%s YUYV -> %d: %s", s, rep.Manifest.InputSize, what), "ms", top, step)
		groupW := area.Dx() / len(cs)
		for g, c := range cs {
			gx := area.Min.X + g*groupW
			bw := min(70, groupW/3)
			for k, side := range []struct {
				name string
				r    *RunResult
				col  color.RGBA
			}{{"edged", c.Latency, colEdg}, {"python", c.Python, colPy}} {
				x := gx + groupW/2 - bw - 6 + k*(bw+12)
				b := bar(side.r, pre)
				y := float64(area.Max.Y)
				for _, seg := range segments {
					v, ok := b[seg.key]
					if !ok || v <= 0 {
						continue
					}
					h := v / 1000 * ppu
					col := seg.col
					if pre { // one segment: the side's colour
						col = side.col
					}
					img.Rect(x, int(math.Round(y-h)), x+bw, int(math.Round(y)), col)
					y -= h
				}
				img.Rect(x, int(y)-2, x+bw, int(y), side.col) // side marker
				img.Text(x+bw/2, int(y)-6, fmt.Sprintf("%.2f", barHeight(b)/1000), black, 1, 0)
				img.Text(x+bw/2, area.Max.Y+15, side.name, side.col, 1, 0)
			}
			kind, _, _ := strings.Cut(c.Input, "-")
			img.Text(gx+groupW/2, area.Max.Y+31, kind+" frames", black, 1, 0)
			key := "overhead p50"
			if pre {
				key = "pre p50"
			}
			if r := c.Row(key); r != nil && r.Ratio != nil {
				img.Text(gx+groupW/2, area.Max.Y+47, fmt.Sprintf("%s edged/py %.2f", strings.TrimSuffix(key, " p50"), *r.Ratio), black, 1, 0)
			}
		}
	}

	// Last panel: throughput (e2e) or pre p99 (pre).
	x0 := 10 + len(sizes)*panelW
	name, unit := "throughput at saturation", "results/s"
	val := func(c *Comparison, python bool) float64 {
		r := c.Row(name)
		if r == nil {
			return math.NaN()
		}
		v := r.Edged
		if python {
			v = r.Python
		}
		if v == nil {
			return math.NaN()
		}
		return *v
	}
	if pre {
		name, unit = "pre p99", "ms"
	}
	scale := 1.0
	if pre {
		scale = 1.0 / 1000
	}
	var vmax float64
	for _, c := range rep.Comparisons {
		for _, py := range []bool{false, true} {
			if v := val(c, py) * scale; !math.IsNaN(v) {
				vmax = max(vmax, v)
			}
		}
	}
	top, step := plot.NiceMax(vmax)
	area, ppu := img.Panel(x0, top0, x0+panelW, bottom, name, unit, top, step)
	groupW := area.Dx() / max(1, len(rep.Comparisons))
	for g, c := range rep.Comparisons {
		gx := area.Min.X + g*groupW
		bw := min(30, groupW/3)
		for k, py := range []bool{false, true} {
			v := val(c, py) * scale
			if math.IsNaN(v) {
				continue
			}
			col := colEdg
			if py {
				col = colPy
			}
			x := gx + groupW/2 - bw - 2 + k*(bw+4)
			h := int(math.Round(v * ppu))
			img.Rect(x, area.Max.Y-h, x+bw, area.Max.Y, col)
			img.Text(x+bw/2, area.Max.Y-h-4, fmtShort(v), black, 1, 0)
		}
		kind, size, _ := strings.Cut(c.Input, "-")
		img.Text(gx+groupW/2, area.Max.Y+15, kind, black, 1, 0)
		img.Text(gx+groupW/2, area.Max.Y+31, size, grey, 1, 0)
	}

	// Legend.
	ly := H - 62
	lx := 20
	for _, seg := range segments {
		if pre {
			break // bars in the sides' colours
		}
		img.Rect(lx, ly-10, lx+14, ly+2, seg.col)
		img.Text(lx+20, ly, seg.label, black, 1, -1)
		lx += 34 + 7*len(seg.label)
	}
	img.Rect(lx, ly-10, lx+14, ly+2, colEdg)
	img.Text(lx+20, ly, "edged", black, 1, -1)
	lx += 70
	img.Rect(lx, ly-10, lx+14, ly+2, colPy)
	img.Text(lx+20, ly, "python", black, 1, -1)
	notes := []string{"Both sides paced at one frame rate. edged: total = read frame -> hand-off to the socket; python: total = read frame -> end of post.",
		"Bars stack stage p50s (they need not add up to the p50 of the total). Lower is better; throughput: higher."}
	if pre {
		notes = []string{"pre: edged's pipeline pre stage vs cvtColor + resize + normalise + HWC->CHW (OpenCV, NumPy).",
			"Lower is better. Numbers: report.md; what each stage includes: bench/README.md."}
	}
	img.Text(20, H-36, notes[0], grey, 1, -1)
	img.Text(20, H-18, notes[1], grey, 1, -1)

	return img.SavePNG(path)
}

func fmtShort(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
