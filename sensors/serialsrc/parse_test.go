package serialsrc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// nmea completes a sentence body with '$', checksum and nothing else.
func nmea(body string) string {
	var sum byte
	for i := 0; i < len(body); i++ {
		sum ^= body[i]
	}
	const hex = "0123456789ABCDEF"
	return "$" + body + "*" + string([]byte{hex[sum>>4], hex[sum&15]})
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestParseNMEA(t *testing.T) {
	var s sensors.Sample
	// The classic example sentences (checksums as published).
	if err := ParseNMEA([]byte("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47"), &s); err != nil {
		t.Fatal(err)
	}
	want := []float64{12*3600 + 35*60 + 19, 48 + 7.038/60, 11 + 31.0/60, 1, 8, 0.9, 545.4}
	if s.Kind != "gga" || s.N != len(want) || len(s.Names) != s.N {
		t.Fatalf("GGA: kind %q N %d names %v", s.Kind, s.N, s.Names)
	}
	for i, w := range want {
		if !approx(s.Values[i], w) {
			t.Errorf("GGA %s = %v, want %v", s.Names[i], s.Values[i], w)
		}
	}
	if err := ParseNMEA([]byte("$GPRMC,123519,A,4807.038,S,01131.000,W,022.4,084.4,230394,003.1,W*6A"), &s); !errors.Is(err, ErrChecksum) {
		t.Fatalf("RMC with flipped hemispheres kept its old checksum: %v, want ErrChecksum", err)
	}
	if err := ParseNMEA([]byte(nmea("GNRMC,235959.50,A,4807.038,S,01131.000,W,022.4,084.4,230394,003.1,W")), &s); err != nil {
		t.Fatal(err)
	}
	want = []float64{23*3600 + 59*60 + 59.5, 1, -(48 + 7.038/60), -(11 + 31.0/60), 22.4 * 1852 / 3600, 84.4}
	if s.Kind != "rmc" || s.N != len(want) {
		t.Fatalf("RMC: kind %q N %d", s.Kind, s.N)
	}
	for i, w := range want {
		if !approx(s.Values[i], w) {
			t.Errorf("RMC %s = %v, want %v", s.Names[i], s.Values[i], w)
		}
	}
	// No fix yet: empty fields are NaN, status V is not valid.
	if err := ParseNMEA([]byte(nmea("GPRMC,,V,,,,,,,,,,N")), &s); err != nil {
		t.Fatal(err)
	}
	if s.Values[1] != 0 || !math.IsNaN(s.Values[2]) || !math.IsNaN(s.Values[4]) {
		t.Errorf("empty RMC: %v", s.Values[:s.N])
	}
	// Lower-case checksum digits are accepted.
	if err := ParseNMEA([]byte("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47"), &s); err != nil {
		t.Fatal(err)
	}
	lower := nmea("GPGSV,3,1,11,03,03,111,00,04,15,270,00,06,01,010,00,13,06,292,00")
	lower = lower[:len(lower)-2] + string(bytes.ToLower([]byte(lower[len(lower)-2:])))
	if err := ParseNMEA([]byte(lower), &s); !errors.Is(err, ErrIgnored) {
		t.Errorf("GSV: %v, want ErrIgnored", err)
	}
	for _, bad := range []string{
		"",
		"GPGGA,123519*00",
		"$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
		"$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*4G",
		nmea("GPGGA,123519,4807.038,X,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"),
		nmea("GPGGA,126519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"),
		nmea("GPGGA,123519,4867.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"),
		nmea("GPGGA,123519,4807.038,N,01131.000,E,1,0x8,0.9,545.4,M,46.9,M,,"),
		nmea("GPGGA,123519,4807.038,N"),
		nmea("GPGGAX,1"),
	} {
		if err := ParseNMEA([]byte(bad), &s); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", bad, err)
		}
	}
	if err := ParseNMEA([]byte("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*48"), &s); !errors.Is(err, ErrChecksum) {
		t.Errorf("bad checksum: %v", err)
	}
}

func TestParsersDoNotAllocate(t *testing.T) {
	var s sensors.Sample
	gga := []byte("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47")
	line := []byte("0.01, -9.81, 0.5, 1e-3, 2, 3")
	names := []string{"ax", "ay", "az", "gx", "gy", "gz"}
	pkt := AppendPacket(nil, []float32{1, 2, 3, 4, 5, 6})
	scratch := make([]byte, 256)
	n := sensorstest.Mallocs(200, func() {
		if ParseNMEA(gga, &s) != nil || ParseCSV(line, names, &s) != nil || ParsePacket(pkt[:len(pkt)-1], scratch, names, &s) != nil {
			t.Fatal("parse failed")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations in 200 NMEA+CSV+COBS parses", n)
	}
}

func TestParseCSV(t *testing.T) {
	names := []string{"ax", "ay", "az"}
	var s sensors.Sample
	if err := ParseCSV([]byte(" 0.5,-9.81 , 1e2\r"), names, &s); err != nil {
		t.Fatal(err)
	}
	if s.N != 3 || s.Values[0] != 0.5 || s.Values[1] != -9.81 || s.Values[2] != 100 || &s.Names[0] != &names[0] {
		t.Fatalf("got %v N %d", s.Values[:3], s.N)
	}
	for _, c := range []struct {
		line string
		want error
	}{
		{"ax,ay,az", ErrIgnored},
		{"# comment", ErrIgnored},
		{"", ErrIgnored},
		{"1,2", ErrMalformed},
		{"1,2,3,4", ErrMalformed},
		{"1,,3", ErrMalformed},
		{"1,2,x", ErrMalformed},
		{"1,2,nan", ErrMalformed},
		{"1,2,3,", ErrMalformed},
	} {
		if err := ParseCSV([]byte(c.line), names, &s); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.line, err, c.want)
		}
	}
}

func TestCOBSVectors(t *testing.T) {
	seq := func(from, to int) []byte {
		var b []byte
		for i := from; i <= to; i++ {
			b = append(b, byte(i))
		}
		return b
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, c := range []struct{ in, out []byte }{
		{[]byte{0}, []byte{1, 1}},
		{[]byte{0, 0}, []byte{1, 1, 1}},
		{[]byte{0, 0x11, 0}, []byte{1, 2, 0x11, 1}},
		{[]byte{0x11, 0x22, 0, 0x33}, []byte{3, 0x11, 0x22, 2, 0x33}},
		{[]byte{0x11, 0x22, 0x33, 0x44}, []byte{5, 0x11, 0x22, 0x33, 0x44}},
		{[]byte{0x11, 0, 0, 0}, []byte{2, 0x11, 1, 1, 1}},
		{seq(1, 254), cat([]byte{0xFF}, seq(1, 254))},
		{seq(0, 254), cat([]byte{1, 0xFF}, seq(1, 254))},
		{seq(1, 255), cat([]byte{0xFF}, seq(1, 254), []byte{2, 0xFF})},
		{cat(seq(2, 255), []byte{0}), cat([]byte{0xFF}, seq(2, 255), []byte{1, 1})},
		{cat(seq(3, 255), []byte{0, 1}), cat([]byte{0xFE}, seq(3, 255), []byte{2, 1})},
	} {
		got := AppendCOBS(nil, c.in)
		if !bytes.Equal(got, c.out) {
			t.Errorf("encode % x:\n got % x\nwant % x", c.in, got, c.out)
		}
		dst := make([]byte, len(c.out))
		n, err := DecodeCOBS(dst, c.out)
		if err != nil || !bytes.Equal(dst[:n], c.in) {
			t.Errorf("decode % x: % x, %v", c.out, dst[:n], err)
		}
	}
	for _, bad := range [][]byte{{0}, {3, 1}, {2, 0}, {1, 0, 1}} {
		if _, err := DecodeCOBS(make([]byte, 8), bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("decode % x: %v, want ErrMalformed", bad, err)
		}
	}
}

func TestPacket(t *testing.T) {
	names := []string{"a", "b", "c"}
	pkt := AppendPacket(nil, []float32{1.5, -2, 0})
	if pkt[len(pkt)-1] != 0 || bytes.IndexByte(pkt[:len(pkt)-1], 0) >= 0 {
		t.Fatalf("packet % x: one trailing delimiter expected", pkt)
	}
	var s sensors.Sample
	scratch := make([]byte, 64)
	frame := pkt[:len(pkt)-1]
	if err := ParsePacket(frame, scratch, names, &s); err != nil {
		t.Fatal(err)
	}
	if s.N != 3 || s.Values[0] != 1.5 || s.Values[1] != -2 || s.Values[2] != 0 {
		t.Fatalf("values %v", s.Values[:s.N])
	}
	if err := ParsePacket(frame, scratch, names[:2], &s); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong value count: %v", err)
	}
	// Every single-bit flip that keeps the frame COBS-valid is caught by
	// the CRC.
	for i := range frame {
		for bit := 0; bit < 8; bit++ {
			f := bytes.Clone(frame)
			f[i] ^= 1 << bit
			err := ParsePacket(f, scratch, names, &s)
			if err == nil {
				t.Fatalf("flip of byte %d bit %d accepted", i, bit)
			}
		}
	}
}

func TestCOBSRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		in := make([]byte, rng.IntN(700))
		for j := range in {
			if rng.IntN(4) > 0 {
				in[j] = byte(rng.IntN(256))
			}
		}
		enc := AppendCOBS(nil, in)
		if bytes.IndexByte(enc, 0) >= 0 {
			t.Fatal("encoding contains a zero")
		}
		if len(enc) > len(in)+len(in)/254+1 {
			t.Fatalf("overhead %d for %d bytes", len(enc)-len(in), len(in))
		}
		out := make([]byte, len(enc))
		n, err := DecodeCOBS(out, enc)
		if err != nil || !bytes.Equal(out[:n], in) {
			t.Fatalf("round trip of %d bytes: %v", len(in), err)
		}
	}
}

func FuzzParseNMEA(f *testing.F) {
	f.Add([]byte("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47"))
	f.Add([]byte("$GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6A"))
	f.Add([]byte(nmea("GPRMC,,V,,,,,,,,,,N")))
	f.Add([]byte("$PUBX,00*33"))
	f.Fuzz(func(t *testing.T, line []byte) {
		var s sensors.Sample
		if err := ParseNMEA(line, &s); err == nil {
			if s.N == 0 || s.N > sensors.MaxSampleValues || len(s.Names) != s.N {
				t.Fatalf("accepted %q with N %d names %d", line, s.N, len(s.Names))
			}
		}
	})
}

func FuzzParseCSV(f *testing.F) {
	f.Add([]byte("0.5,-9.81,1e2"))
	f.Add([]byte("ax,ay,az"))
	f.Add([]byte("1,,2"))
	names := []string{"ax", "ay", "az"}
	f.Fuzz(func(t *testing.T, line []byte) {
		var s sensors.Sample
		if err := ParseCSV(line, names, &s); err == nil && s.N != 3 {
			t.Fatalf("accepted %q with N %d", line, s.N)
		}
	})
}

func FuzzCOBS(f *testing.F) {
	f.Add(AppendPacket(nil, []float32{1, 2, 3}))
	f.Add([]byte{1, 1, 1})
	f.Add([]byte{0xFF, 1, 2})
	names := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Decoding arbitrary bytes never panics and never writes past
		// a dst of len(data).
		dst := make([]byte, len(data))
		if n, err := DecodeCOBS(dst, data); err == nil {
			if again := AppendCOBS(nil, dst[:n]); len(again) > len(data)+1 {
				t.Fatalf("decoded %d bytes re-encode to %d, from %d", n, len(again), len(data))
			}
		}
		var s sensors.Sample
		scratch := make([]byte, len(data))
		_ = ParsePacket(data, scratch, names, &s)
		// Any payload survives encode+decode.
		enc := AppendCOBS(nil, data)
		out := make([]byte, len(enc))
		n, err := DecodeCOBS(out, enc)
		if err != nil || !bytes.Equal(out[:n], data) {
			t.Fatalf("round trip of % x failed: %v", data, err)
		}
	})
}
