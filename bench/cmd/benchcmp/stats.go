package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// Stages in report order. edged's results carry pre, infer, post and total
// today and will carry fill, queue and encode; loop.py's carry fill, pre,
// infer, post, total and encode (the previous line's). A stage a record
// does not carry is absent, never zero.
var stages = []string{"fill", "queue", "pre", "infer", "post", "encode", "total"}

// Overhead is the derived stage total − infer, computed per record.
const Overhead = "overhead"

// record is the part of a result or status line the harness reads.
type record struct {
	Type     string           `json:"type"`
	Seq      uint64           `json:"seq"`
	FrameSeq uint64           `json:"frame_seq"`
	Latency  map[string]int64 `json:"latency_us"`
	Event    string           `json:"event"`
	Info     json.RawMessage  `json:"info"` // loop.py's pyloop_info
}

// parseRecord decodes one NDJSON line.
func parseRecord(line []byte) (record, error) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return record{}, fmt.Errorf("bad record %.80q: %w", line, err)
	}
	if r.Type == "" {
		return record{}, fmt.Errorf("record without type: %.80q", line)
	}
	return r, nil
}

// stageValue returns a record's value for a stage (or the derived
// overhead) and whether it has one.
func stageValue(r *record, stage string) (int64, bool) {
	if stage == Overhead {
		t, ok1 := r.Latency["total"]
		i, ok2 := r.Latency["infer"]
		return t - i, ok1 && ok2
	}
	v, ok := r.Latency[stage]
	return v, ok
}

// Dist summarises one stage over the measured records, in microseconds.
type Dist struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	Mean float64 `json:"mean_us"`
	Max  float64 `json:"max_us"`
}

// percentile is the nearest-rank percentile (the smallest value with at
// least p% of the values at or below it) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(k, 1), len(sorted))-1]
}

func distOf(vals []float64) Dist {
	if len(vals) == 0 {
		return Dist{}
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Dist{N: len(s), P50: percentile(s, 50), P99: percentile(s, 99), Mean: sum / float64(len(s)), Max: s[len(s)-1]}
}

// stageDists summarises every stage present in at least one record, plus
// the overhead where records have both total and infer.
func stageDists(recs []record) map[string]Dist {
	out := map[string]Dist{}
	for _, st := range append(slices.Clone(stages), Overhead) {
		var vals []float64
		for i := range recs {
			if v, ok := stageValue(&recs[i], st); ok {
				vals = append(vals, float64(v))
			}
		}
		if len(vals) > 0 {
			out[st] = distOf(vals)
		}
	}
	return out
}

// arrival is a record and when the harness read it.
type arrival struct {
	at  time.Time
	rec record
}

// window returns the results among the records that arrived in [from, to),
// and how many records were lost among them (per-client seq gaps: edged
// drops the oldest records of a client that reads too slowly). all holds
// every record read, status records included, in arrival order.
func window(all []arrival, from, to time.Time) (recs []record, lost uint64) {
	var last uint64
	for _, a := range all {
		if a.at.Before(from) {
			last = a.rec.Seq
			continue
		}
		if !a.at.Before(to) {
			break
		}
		if last != 0 && a.rec.Seq > last+1 {
			lost += a.rec.Seq - last - 1
		}
		last = a.rec.Seq
		if a.rec.Type == "result" {
			recs = append(recs, a.rec)
		}
	}
	return recs, lost
}
