package main

import (
	"maps"
	"slices"
	"testing"

	"github.com/edged-dev/edged/runtime/config"
)

// TestSourceKindsRegisteredOnce: the kinds whose keys the configuration
// knows (registered in kinds.go) are the kinds the binary builds and
// checks (sourceKinds), so a kind is never accepted by edged check and
// then unknown to run, or the other way round.
func TestSourceKindsRegisteredOnce(t *testing.T) {
	keys, built := config.SourceKindNames(), slices.Sorted(maps.Keys(sourceKinds))
	if !slices.Equal(slices.Sorted(slices.Values(keys)), built) {
		t.Errorf("the configuration knows the source kinds %v, the binary builds %v", keys, built)
	}
	for _, k := range keys {
		if config.IsCamera(k) != (sourceKinds[k].camera != nil) {
			t.Errorf("source kind %s: a camera to the configuration %v, built as one %v", k, config.IsCamera(k), sourceKinds[k].camera != nil)
		}
	}
}

// TestSinkKindsRegisteredOnce: the sink kinds whose keys the configuration
// knows (registered in kinds.go) are the kinds the binary builds and
// checks (sinkKinds).
func TestSinkKindsRegisteredOnce(t *testing.T) {
	keys, built := config.SinkKindNames(), slices.Sorted(maps.Keys(sinkKinds))
	if !slices.Equal(slices.Sorted(slices.Values(keys)), built) {
		t.Errorf("the configuration knows the sink kinds %v, the binary builds %v", keys, built)
	}
}
