package backoff

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestDelay: retry n waits between half and all of Min·2ⁿ, capped at Max,
// and the draws differ.
func TestDelay(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000} {
		want *= time.Millisecond
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.Delay(n)
			if d < want/2 || d > want {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Delay(%d): only %d different delays in 200 draws: no jitter", n, len(seen))
		}
	}
	if d := p.Delay(1 << 20); d > p.Max {
		t.Errorf("Delay of a huge n = %v, over Max", d)
	}
	if d := (Policy{}).Delay(3); d != 0 {
		t.Errorf("the zero Policy waits %v", d)
	}
	if p, q := Restart.Delay(0), Restart.Delay(100); p > 100*time.Millisecond || q > 2*time.Second {
		t.Errorf("Restart: %v first, %v at the cap", p, q)
	}
}

// TestSleep: Sleep waits its time, and returns false as soon as its
// context ends.
func TestSleep(t *testing.T) {
	t0 := time.Now()
	if !Sleep(context.Background(), 20*time.Millisecond) || time.Since(t0) < 20*time.Millisecond {
		t.Errorf("Sleep returned early")
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	t0 = time.Now()
	if Sleep(ctx, time.Minute) {
		t.Error("Sleep ran its course despite the cancel")
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("Sleep took %v to see the cancel", took)
	}
}

// TestRetry: failed starts and short runs both grow the delay; only a run
// that lasted Reset clears it, and the start after such a run is at once.
func TestRetry(t *testing.T) {
	// The short runs below end at once, but a loaded machine can stall
	// the test between a Started and its Ended: with a Reset of a minute
	// such a run is still short. The healthy run further down lowers
	// Reset, so that it need not sleep that long.
	r := Retry{Policy: Policy{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond, Reset: time.Minute}}
	if d := r.Failed(); d < 5*time.Millisecond || d > 10*time.Millisecond {
		t.Fatalf("first failure: %v", d)
	}
	for i, want := range []time.Duration{20, 40, 40} { // started, then failed at once: a short run
		r.Started()
		if r.Stable() {
			t.Fatal("stable at once")
		}
		want *= time.Millisecond
		if d := r.Ended(); d < want/2 || d > want {
			t.Fatalf("short run %d: wait %v, want within [%v, %v]", i, d, want/2, want)
		}
	}
	if r.Failures() != 4 {
		t.Fatalf("failures %d, want 4", r.Failures())
	}
	r.Policy.Reset = 50 * time.Millisecond
	r.Started()
	time.Sleep(60 * time.Millisecond)
	if !r.Stable() {
		t.Fatal("a run of 60 ms is not stable with Reset 50 ms")
	}
	if d := r.Ended(); d != 0 || r.Failures() != 0 {
		t.Fatalf("after a healthy run: wait %v, failures %d", d, r.Failures())
	}
	if d := r.Ended(); d < 5*time.Millisecond || d > 10*time.Millisecond { // ended without a start: a failure
		t.Fatalf("Ended without Started: %v", d)
	}
}

// TestMostAttempts: the bound the retry tests of runtime, mqttsink and
// serialsink hold their loops to, against the waits Delay draws: no run
// of shortest-possible waits holds more, and the policies' figures are
// the ones their tests' comments give.
func TestMostAttempts(t *testing.T) {
	for _, c := range []struct {
		p      Policy
		window time.Duration
		want   int
	}{
		{Restart, 3 * time.Second, 7}, // 50+100+200+400+800+1000 ms = 2.55 s
		{Policy{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}, 2 * time.Second, 11}, // mqttsink's test
		{Policy{Min: 20 * time.Millisecond, Max: 320 * time.Millisecond}, 2 * time.Second, 16}, // serialsink's test
		{Restart, 0, 1},
		{Restart, 49 * time.Millisecond, 1},
		{Restart, 50 * time.Millisecond, 2},
	} {
		if got := c.p.MostAttempts(c.window); got != c.want {
			t.Errorf("%+v over %v: %d attempts, want %d", c.p, c.window, got, c.want)
		}
		// However the draws fall, the attempts they allow are no more.
		for range 200 {
			n, at := 1, time.Duration(0)
			for i := 0; ; i++ {
				if at += c.p.Delay(i); at > c.window {
					break
				}
				n++
			}
			if n > c.want {
				t.Fatalf("%+v over %v: drawn waits allowed %d attempts, over the bound %d", c.p, c.window, n, c.want)
			}
		}
	}
	if n := (Policy{}).MostAttempts(time.Second); n != math.MaxInt {
		t.Errorf("a policy that does not wait holds %d attempts", n)
	}
}
