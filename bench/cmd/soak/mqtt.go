package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"time"

	"github.com/edged-dev/edged/internal/mosquittotest"
	"github.com/edged-dev/edged/runtime/stream"
)

// The MQTT part of the soak: a Mosquitto on loopback that edged's MQTT sink
// "cloud" publishes to, a subscriber with a persistent session that takes
// every record, and a churn that stops the broker for -broker-down every
// -broker-every. Every record the sink queued must arrive, seq contiguous
// from the run's sink_started to the last one delivered, across every
// restart of the broker (duplicates allowed: at least once).

const (
	mqttDevice       = "soak"
	reconnectTimeout = 30 * time.Second // the broker back, to edged_sink_connected 1
)

// mqttPart is the broker and what the subscriber received.
type mqttPart struct {
	broker *mosquittotest.Broker
	sub    *mosquittotest.Subscriber
}

// startMQTT starts the broker (in dir) and the subscriber.
func startMQTT(dir string) (*mqttPart, error) {
	bin := mosquittotest.Lookup()
	if bin == "" {
		return nil, fmt.Errorf("mosquitto not found (apt-get install mosquitto, or $EDGED_MOSQUITTO); -mqtt=false runs the soak without MQTT")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b := &mosquittotest.Broker{Bin: bin, Dir: dir, Port: port}
	if err := b.Start(); err != nil {
		return nil, err
	}
	sub, err := mosquittotest.Subscribe(b.URL("mqtt"), "edged/"+mqttDevice+"/#", "soak-subscriber", "", "")
	if err != nil {
		b.Stop()
		return nil, err
	}
	return &mqttPart{broker: b, sub: sub}, nil
}

func (m *mqttPart) close() {
	m.sub.Close()
	m.broker.Stop()
}

// mqttSinkConfig is the [[sink]] of the soak's configuration.
func (m *mqttPart) sinkConfig() string {
	return fmt.Sprintf("\n[[sink]]\nname = \"cloud\"\nkind = \"mqtt\"\nurl = %q\nack_timeout = \"5s\"\n", m.broker.URL("mqtt").String())
}

// brokerChurn stops the broker for -broker-down every -broker-every and
// checks that edged connects again within reconnectTimeout of its return.
func (s *soak) brokerChurn(ctx context.Context) {
	for {
		if !sleepCtx(ctx, s.jitter(s.o.brokerEvery)) {
			return
		}
		t := time.Now()
		s.mqtt.broker.Stop()
		s.count("broker_restarts")
		sleepCtx(ctx, s.o.brokerDown)
		if err := s.mqtt.broker.Start(); err != nil {
			s.problem("mqtt: the broker did not start again at t=%.0f s: %v", s.at(time.Now()), err)
			return
		}
		back := time.Now()
		if waitUntil(ctx, reconnectTimeout, func() bool {
			m := s.latestMetrics()
			return m != nil && m.at.After(back) && m.get("edged_sink_connected", "sink", "cloud") == 1
		}) {
			s.count("broker_reconnected")
			s.addTime("mqtt_reconnect", time.Since(back))
		} else if ctx.Err() == nil {
			s.problem("mqtt: the broker stopped at t=%.0f s for %v; edged was not connected again within %v of its return", s.at(t), s.o.brokerDown, reconnectTimeout)
		}
	}
}

// MQTTSum is what the subscriber received.
type MQTTSum struct {
	Records    int    `json:"records"`    // messages decoded (duplicates included)
	Unique     int    `json:"unique"`     // distinct seqs
	Duplicates int    `json:"duplicates"` // resent after a reconnect (at least once)
	FirstSeq   uint64 `json:"first_seq"`  // the run's sink_started
	LastSeq    uint64 `json:"last_seq"`   // the highest seq delivered
	Gaps       int    `json:"gaps"`       // seqs between first and last that never arrived
	Dropped    int    `json:"dropped"`    // edged_sink_dropped_total of the sink (any reason)
	Restarts   int    `json:"broker_restarts"`
}

// mqttVerdict waits a moment for what was delivered before the stop (on
// loopback it arrives at once) and judges what the subscriber got.
func (s *soak) mqttVerdict() *MQTTSum {
	time.Sleep(time.Second)
	dropped := 0
	if m := s.latestMetrics(); m != nil {
		dropped = int(m.sum("edged_sink_dropped_total", func(l map[string]string) bool { return l["sink"] == "cloud" }))
	}
	s.mu.Lock()
	restarts := s.counts["broker_restarts"]
	s.mu.Unlock()
	sum, problems := judgeMQTT(s.mqtt.sub.Messages(), dropped, restarts)
	for _, p := range problems {
		s.problem("mqtt: %s", p)
	}
	return sum
}

// judgeMQTT decodes the messages and checks them: one sink_started (one
// run of the sink), the device, and every seq from the sink_started to the
// last delivered, except as many as edged counted dropped.
func judgeMQTT(msgs []mosquittotest.Message, dropped, restarts int) (*MQTTSum, []string) {
	sum := &MQTTSum{Restarts: restarts, Dropped: dropped}
	var problems []string
	seen := map[uint64]bool{}
	var starts []uint64
	for _, msg := range msgs {
		if p := string(msg.Payload); p == "online" || p == "offline" {
			continue
		}
		var d stream.Decoded
		if err := stream.DecodeJSON(msg.Payload, &d); err != nil {
			problems = append(problems, fmt.Sprintf("a message on %s does not decode: %v", msg.Topic, err))
			continue
		}
		sum.Records++
		if d.Device != mqttDevice {
			problems = append(problems, fmt.Sprintf("a record of device %q, want %q", d.Device, mqttDevice))
		}
		if seen[d.Seq] {
			sum.Duplicates++
			continue
		}
		seen[d.Seq] = true
		if d.Event == "sink_started" {
			starts = append(starts, d.Seq)
		}
		sum.LastSeq = max(sum.LastSeq, d.Seq)
	}
	sum.Unique = len(seen)
	if len(starts) != 1 {
		problems = append(problems, fmt.Sprintf("%d sink_started records (seqs %v), want 1: one run of the sink", len(starts), starts))
		if len(starts) == 0 {
			return sum, problems
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	sum.FirstSeq = starts[0]
	var missing []uint64
	for seq := sum.FirstSeq; seq <= sum.LastSeq; seq++ {
		if !seen[seq] {
			missing = append(missing, seq)
		}
	}
	sum.Gaps = len(missing)
	if sum.Gaps > sum.Dropped {
		problems = append(problems, fmt.Sprintf("%d seqs between %d and %d never arrived (edged counted %d dropped), e.g. %v",
			sum.Gaps, sum.FirstSeq, sum.LastSeq, sum.Dropped, missing[:min(len(missing), 5)]))
	}
	if sum.Unique < 100 {
		problems = append(problems, fmt.Sprintf("only %d records arrived", sum.Unique))
	}
	return sum, problems
}

func mqttBrokerDir(dir string) string { return filepath.Join(dir, "mosquitto") }
