package metrictest

import dto "github.com/prometheus/client_model/go"

// Series finds the metric of family name whose labels include the given
// name/value pairs (others may be present), or nil.
func Series(mfs map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return m
	}
	return nil
}
