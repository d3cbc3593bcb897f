package stream

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestDialWaitsForTheSubscription: records the daemon queued for a new
// connection before its subscribe request arrived (the default
// subscription: every pipeline) are not returned by a Client that
// subscribed; the "subscribed" reply is the first record, then the
// subscribed pipeline's. An error record is still returned (a refusal).
// Before, `edged tail -pipeline quiet` printed another pipeline's results
// that raced the request (seen in CI under qemu).
func TestDialWaitsForTheSubscription(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sent  []*Record
		types []string // what Next returns, by event or pipeline
	}{
		{"other pipeline before the reply", []*Record{
			{Kind: KindResult, Pipeline: "demo"},
			{Kind: KindStatus, Event: EventKeepalive},
			{Kind: KindResult, Pipeline: "demo"},
			{Kind: KindStatus, Event: "subscribed"},
			{Kind: KindResult, Pipeline: "quiet"},
		}, []string{"subscribed", "quiet"}},
		{"refused", []*Record{
			{Kind: KindResult, Pipeline: "demo"},
			{Kind: KindError, Reason: "too many clients"},
		}, []string{"error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sock")
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				// Write the records first, as a daemon publishing before it
				// read the request does; then read the request.
				var b []byte
				for i, r := range tc.sent {
					b = AppendNDJSON(b, r, uint64(i+1))
				}
				c.Write(b)
				bufio.NewReader(c).ReadString('\n')
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl, err := Dial(ctx, path, &Subscription{Pipelines: []string{"quiet"}})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for _, want := range tc.types {
				var m Message
				if err := cl.Next(&m); err != nil {
					t.Fatalf("want %s: %v", want, err)
				}
				got := m.Rec.Pipeline
				switch m.Rec.Type {
				case "status":
					got = m.Rec.Event
				case "error":
					got = "error"
				}
				if got != want {
					t.Fatalf("Next returned %s (%+v), want %s", got, m.Rec, want)
				}
			}
		})
	}
}
