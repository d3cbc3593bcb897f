package main

import (
	"fmt"
	"image/color"
	"math"

	"github.com/edged-dev/edged/bench/internal/plot"
)

var wayColour = map[string]color.RGBA{
	wayOwn:     {200, 60, 50, 255},
	wayShared:  {50, 110, 200, 255},
	wayBatched: {40, 150, 70, 255},
}

// plot draws batch.png: per camera count, one line per way, of results/s
// free-running, p99 total paced and RSS paced.
func (rep *report) plot(path string) error {
	const W, panelH = 900, 260
	panels := []struct {
		title, unit, phase string
		get                func(f fig) float64
	}{
		{"results/s in total, every camera free-running", "1/s", phaseSaturation, func(f fig) float64 { return f.resultsPS }},
		{fmt.Sprintf("p99 of latency_us.total, every camera at %g fps", rep.FPS), "ms", phasePaced, func(f fig) float64 { return f.p99 / 1000 }},
		{fmt.Sprintf("resident memory (VmRSS), every camera at %g fps", rep.FPS), "MiB", phasePaced, func(f fig) float64 { return f.rss / (1 << 20) }},
	}
	// Only the panels of the phases that ran.
	for i := 0; i < len(panels); i++ {
		ran := false
		for _, r := range rep.Runs {
			ran = ran || r.Case.Phase == panels[i].phase
		}
		if !ran {
			panels = append(panels[:i], panels[i+1:]...)
			i--
		}
	}
	H := 70 + len(panels)*panelH + 30
	if rep.has(phaseStalled) {
		H += panelH
	}
	img := plot.New(W, H)
	img.Text(W/2, 30, "edged batchbench: N replay cameras (1080p YUYV) on one model", plot.Black, 2, 0)
	img.Text(W/2, 52, fmt.Sprintf("%s | %s | %s", rep.Date, rep.Edged, rep.Machine), plot.Grey, 1, 0)
	for i, pn := range panels {
		vmax := 0.0
		for _, w := range rep.Ways {
			for _, n := range rep.Counts {
				if v := pn.get(rep.figure(w, n, pn.phase)); !math.IsNaN(v) {
					vmax = math.Max(vmax, v)
				}
			}
		}
		top, step := plot.NiceMax(vmax * 1.05)
		y0 := 70 + i*panelH
		area, ppu := img.Panel(10, y0, W-10, y0+panelH, pn.title, pn.unit, top, step)
		// The counts evenly spaced (1, 2, 4, 8: a log scale).
		x := func(k int) int { return area.Min.X + 40 + k*(area.Dx()-80)/max(len(rep.Counts)-1, 1) }
		y := func(v float64) int { return area.Max.Y - int(math.Round(v*ppu)) }
		for k, n := range rep.Counts {
			img.Rect(x(k), area.Max.Y, x(k)+1, area.Max.Y+4, plot.Grey)
			img.Text(x(k), area.Max.Y+16, fmt.Sprint(n), plot.Grey, 1, 0)
		}
		if i == len(panels)-1 {
			img.Text(area.Max.X, area.Max.Y+32, "cameras", plot.Grey, 1, 1)
		}
		for _, w := range rep.Ways {
			col := wayColour[w]
			have := false
			var px, py int
			for k, n := range rep.Counts {
				v := pn.get(rep.figure(w, n, pn.phase))
				if math.IsNaN(v) {
					have = false
					continue
				}
				cx, cy := x(k), y(v)
				img.Rect(cx-3, cy-3, cx+4, cy+4, col)
				if have {
					for d := -1; d <= 1; d++ {
						img.Line(px, py+d, cx, cy+d, col)
					}
				}
				px, py, have = cx, cy, true
			}
		}
	}
	if rep.has(phaseStalled) {
		rep.fairnessPanel(img, 10, 70+len(panels)*panelH, W-10, 70+(len(panels)+1)*panelH)
	}
	lx, ly := 20, H-14
	for _, w := range rep.Ways {
		img.Rect(lx, ly-10, lx+14, ly+2, wayColour[w])
		label := map[string]string{wayOwn: "own: an engine per camera", wayShared: "shared: a pipeline per camera, one engine",
			wayBatched: "batched: one pipeline, sources = [...]"}[w]
		img.Text(lx+20, ly, label, plot.Black, 1, -1)
		lx += 40 + 7*len(label)
	}
	return img.SavePNG(path)
}

// fairnessPanel draws, per way, the p99 of the cameras that keep running
// without and with the last one stalled, and the bound (a dashed line).
func (rep *report) fairnessPanel(img plot.Canvas, x0, y0, x1, y1 int) {
	n := rep.Counts[len(rep.Counts)-1]
	type bars struct{ un, st, bound float64 }
	var v []bars
	vmax := 0.0
	for _, w := range rep.Ways {
		b := bars{un: rep.othersUnstalled(w, n) / 1000, st: rep.figure(w, n, phaseStalled).othersP99 / 1000}
		b.bound = b.un + rep.waitUs(w)/1000
		v = append(v, b)
		for _, x := range []float64{b.un, b.st, b.bound} {
			if !math.IsNaN(x) {
				vmax = math.Max(vmax, x)
			}
		}
	}
	top, step := plot.NiceMax(vmax * 1.1)
	title := fmt.Sprintf("p99 of latency_us.total of %d cameras: unstalled (light) and with %s stalled (dark); dashed: unstalled + batch_wait", n-1, cameraName(n-1))
	area, ppu := img.Panel(x0, y0, x1, y1, title, "ms", top, step)
	y := func(v float64) int { return area.Max.Y - int(math.Round(v*ppu)) }
	slot := area.Dx() / max(len(rep.Ways), 1)
	for i, w := range rep.Ways {
		cx := area.Min.X + slot*i + slot/2
		col := wayColour[w]
		light := color.RGBA{col.R/2 + 127, col.G/2 + 127, col.B/2 + 127, 255}
		if b := v[i]; !math.IsNaN(b.un) && !math.IsNaN(b.st) {
			img.Rect(cx-50, y(b.un), cx-4, area.Max.Y, light)
			img.Rect(cx+4, y(b.st), cx+50, area.Max.Y, col)
			img.DashedH(cx-60, cx+60, y(b.bound), plot.Black)
		}
		img.Text(cx, area.Max.Y+16, w, plot.Grey, 1, 0)
	}
}
