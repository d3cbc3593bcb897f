package board

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/edged-dev/edged/runtime/board/boardtest"
	"github.com/edged-dev/edged/umem"
)

// BenchmarkReadCycle is the cost of one read cycle (every two seconds) on
// each board's tree, against the baseline of one read of meminfo alone
// (umem.ReadMeminfo: what the daemon pays for each scrape of
// edged_system_memory_available_bytes). The trees are files on the
// machine's disk, so this is edged's own cost: on a Jetson, a sysfs read
// of a temperature or a rail also waits for the sensor (TestHILBoard
// prints a real board's cycle). "host" reads this machine's /sys and /proc.
func BenchmarkReadCycle(b *testing.B) {
	tr := boardtest.Copy(b, boardtest.OrinJP6)
	b.Run("baseline=meminfo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := umem.ReadMeminfo(tr.Paths.Proc); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, name := range boardtest.Boards {
		r := NewReader(Paths(boardtest.Copy(b, name).Paths))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, problems := r.Read(); len(problems) > 0 {
					b.Fatal(problems)
				}
			}
		})
	}
	r := NewReader(Paths{})
	b.Run("host", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Read()
		}
	})
}

// BenchmarkScrape is the cost the board adds to each scrape of /metrics:
// gathering its collector (which reads nothing: it formats the latest
// cycle) and writing the text format, against the baseline of
// client_golang's Go runtime collector, which every scrape pays.
func BenchmarkScrape(b *testing.B) {
	scrape := func(b *testing.B, c prometheus.Collector) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			mfs, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("baseline=go-collector", func(b *testing.B) { scrape(b, collectors.NewGoCollector()) })
	for _, name := range []string{boardtest.OrinJP5, boardtest.OrinJP6} {
		m := New(Options{Paths: Paths(boardtest.Copy(b, name).Paths), Interval: time.Hour})
		m.Start()
		b.Run(name, func(b *testing.B) { scrape(b, m.Collector()) })
		m.Close()
	}
}
