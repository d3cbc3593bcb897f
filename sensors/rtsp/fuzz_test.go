package rtsp

import (
	"errors"
	"strings"
	"testing"

	"github.com/bluenviron/gortsplib/v5/pkg/description"
	"github.com/bluenviron/gortsplib/v5/pkg/sdpunmarshaler"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

const sdpHead = "v=0\r\no=- 1188340656180883 1 IN IP4 127.0.0.1\r\ns=Session streamed with GStreamer\r\nt=0 0\r\na=control:*\r\n"

var sdpSeeds = []string{
	sdpHead + "m=video 0 RTP/AVP 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 H264/90000\r\na=framerate:30\r\n" +
		"a=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z2QAKKyyAPAET8uAiAAAAwAIAAADAeB4wZJA,aOvMsiw=;profile-level-id=640028\r\na=control:stream=0\r\n",
	sdpHead + "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H265/90000\r\n" +
		"a=fmtp:96 sprop-vps=QAEMAf//AWAAAAMAkAAAAwAAAwB4koCQ;sprop-sps=QgEBAWAAAAMAkAAAAwAAAwB4oAPAgBDllkqSTK8BaAgAAAMACAAAAwDwQA==;sprop-pps=RAHBcrRiQA==\r\na=control:stream=0\r\n",
	sdpHead + "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H265/90000\r\na=fmtp:96 sprop-max-don-diff=2\r\n",
	sdpHead + "m=audio 0 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\nm=video 0 RTP/AVP 26\r\na=rtpmap:26 JPEG/90000\r\n",
	// Parameter sets that are not (gortsplib drops them): played with the
	// ones in band.
	sdpHead + "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1;sprop-parameter-sets=AAAA,////\r\n",
}

// FuzzSDP: any SDP a camera answers DESCRIBE with goes through gortsplib's
// parser (as its client does) and the track choice: no panic; an accepted
// track is H.264 or H.265 video whose parameter sets, when used, parse to
// a size within h26x.MaxDimension; a refusal wraps sensors.ErrFormat.
func FuzzSDP(f *testing.F) {
	for _, s := range sdpSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ssd, err := sdpunmarshaler.Unmarshal(b)
		if err != nil {
			return
		}
		var desc description.Session
		if desc.Unmarshal2(ssd) != nil {
			return
		}
		media, tr, err := pickTrack(&desc)
		if err != nil {
			if !errors.Is(err, sensors.ErrFormat) {
				t.Fatalf("refusal %v does not wrap sensors.ErrFormat", err)
			}
			return
		}
		if media == nil || media.Type != description.MediaTypeVideo || (tr.codec != h26x.H264 && tr.codec != h26x.H265) {
			t.Fatalf("track %+v of %+v", tr, media)
		}
		if tr.params.AnnexB != nil {
			if s := tr.params.SPS; s.Width <= 0 || s.Height <= 0 || s.Width > h26x.MaxDimension || s.Height > h26x.MaxDimension {
				t.Fatalf("SPS %+v", s)
			}
		} else if tr.note == "" {
			t.Fatal("parameter sets unused without a reason")
		}
	})
}

// TestSDPSeeds: what the seeds above are meant to show.
func TestSDPSeeds(t *testing.T) {
	want := []string{"h264 High@4.0 1920x1080", "h265 Main@4.0 1920x1080", "decoding order", "no H.264 or H.265", "no parameter sets"}
	for i, s := range sdpSeeds {
		ssd, err := sdpunmarshaler.Unmarshal([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		var desc description.Session
		if err := desc.Unmarshal2(ssd); err != nil {
			t.Fatal(err)
		}
		_, tr, err := pickTrack(&desc)
		got := ""
		switch {
		case err != nil:
			got = err.Error()
		case tr.params.AnnexB != nil:
			got = tr.params.SPS.String()
		default:
			got = tr.note
		}
		if !strings.Contains(got, want[i]) {
			t.Errorf("seed %d: %q, want %q in it", i, got, want[i])
		}
	}
}
