package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edged-dev/edged/internal/procfs"
)

// series is one sample line of the Prometheus text format.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is one scrape of /metrics.
type metrics struct {
	at     time.Time
	series []series
}

// parseMetrics reads the Prometheus text format as edged serves it by
// default (client_golang: label values escape only \\, \" and \n, which
// strconv.Unquote reads; no timestamps; histograms as _bucket, _sum and
// _count samples).
func parseMetrics(text []byte) ([]series, error) {
	var out []series
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("metrics: %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", line, err)
		}
		s := series{name: line[:sp], value: v, labels: map[string]string{}}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			ls := strings.TrimSuffix(s.name[i+1:], "}")
			s.name = s.name[:i]
			for ls != "" {
				k, rest, ok := strings.Cut(ls, "=")
				if !ok {
					return nil, fmt.Errorf("metrics: labels of %q", line)
				}
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					return nil, fmt.Errorf("metrics: labels of %q: %w", line, err)
				}
				s.labels[k], _ = strconv.Unquote(q)
				ls = strings.TrimPrefix(rest[len(q):], ",")
			}
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// get returns the value of the first series called name whose labels
// include the given pairs, or NaN.
func (m *metrics) get(name string, labels ...string) float64 {
	if s := m.find(name, labels...); s != nil {
		return s.value
	}
	return math.NaN()
}

func (m *metrics) find(name string, labels ...string) *series {
	if m == nil {
		return nil
	}
next:
	for i := range m.series {
		s := &m.series[i]
		if s.name != name {
			continue
		}
		for j := 0; j+1 < len(labels); j += 2 {
			if s.labels[labels[j]] != labels[j+1] {
				continue next
			}
		}
		return s
	}
	return nil
}

// sum adds up every series called name for which keep is true.
func (m *metrics) sum(name string, keep func(map[string]string) bool) float64 {
	if m == nil {
		return math.NaN()
	}
	var t float64
	for _, s := range m.series {
		if s.name == name && keep(s.labels) {
			t += s.value
		}
	}
	return t
}

type scraper struct {
	url    string
	client *http.Client
}

func newScraper(addr string) *scraper {
	return &scraper{url: "http://" + addr, client: &http.Client{Timeout: 3 * time.Second}}
}

func (s *scraper) scrape() (*metrics, error) {
	resp, err := s.client.Get(s.url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	ser, err := parseMetrics(b)
	if err != nil {
		return nil, err
	}
	return &metrics{at: time.Now(), series: ser}, nil
}

func (s *scraper) ready() bool {
	resp, err := s.client.Get(s.url + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// procSample reads VmRSS (MiB) and the number of open fds of pid.
func procSample(pid int) (rssMiB, fds float64) {
	rssMiB, fds = math.NaN(), math.NaN()
	if m, err := procfs.ReadMem(pid); err == nil {
		rssMiB = float64(m.RSS) / 1024
	}
	if d, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = float64(len(d))
	}
	return rssMiB, fds
}
