package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edged-dev/edged/internal/mosquittotest"
)

func recordMsg(seq uint64, event string) mosquittotest.Message {
	if event != "" {
		return mosquittotest.Message{Topic: "edged/soak/status", Payload: []byte(fmt.Sprintf(`{"type":"status","v":1,"seq":%d,"device":"soak","event":%q,"t_ns":1}`, seq, event))}
	}
	return mosquittotest.Message{Topic: "edged/soak/soak/results", Payload: []byte(fmt.Sprintf(`{"type":"result","v":1,"seq":%d,"device":"soak","pipeline":"soak","frame_seq":1,"t_capture_ns":1,"outputs":{}}`, seq))}
}

// TestJudgeMQTT: contiguous with duplicates passes; a gap fails unless
// edged counted that many dropped; a second sink_started (a second run of
// the sink) fails.
func TestJudgeMQTT(t *testing.T) {
	run := func(skip uint64, extraStart bool) []mosquittotest.Message {
		msgs := []mosquittotest.Message{{Payload: []byte("online")}, recordMsg(1000, "sink_started")}
		for seq := uint64(1001); seq < 1200; seq++ {
			if seq == skip {
				continue
			}
			msgs = append(msgs, recordMsg(seq, ""))
			if seq%50 == 0 {
				msgs = append(msgs, recordMsg(seq, "")) // resent after a reconnect
			}
		}
		if extraStart {
			msgs = append(msgs, recordMsg(5000, "sink_started"))
		}
		return msgs
	}
	sum, problems := judgeMQTT(run(0, false), 0, 3)
	if len(problems) != 0 || sum.Unique != 200 || sum.Gaps != 0 || sum.Duplicates != 3 || sum.FirstSeq != 1000 || sum.LastSeq != 1199 {
		t.Fatalf("%+v %q", sum, problems)
	}
	if _, problems := judgeMQTT(run(1100, false), 0, 3); len(problems) != 1 || !strings.Contains(problems[0], "never arrived") {
		t.Errorf("a gap: %q", problems)
	}
	if _, problems := judgeMQTT(run(1100, false), 1, 3); len(problems) != 0 {
		t.Errorf("a gap edged counted: %q", problems)
	}
	if _, problems := judgeMQTT(run(0, true), 0, 3); len(problems) == 0 || !strings.Contains(problems[0], "2 sink_started") {
		t.Errorf("two runs: %q", problems)
	}
}
