// Package metrictest finds series in parsed Prometheus metric families,
// for the tests that scrape edged's /metrics (runtime's collector and the
// real binary). Tests only.
package metrictest
