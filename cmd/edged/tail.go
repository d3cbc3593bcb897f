package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
)

func cmdTail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tail", stderr)
	sock := fs.String("socket", "", socketFlagHelp)
	n := fs.Int("n", 0, "stop after N records (0 = until interrupted)")
	asJSON := fs.Bool("json", false, "print records as raw JSON lines (one per record)")
	pipelines := fs.String("pipeline", "", "comma-separated pipelines to subscribe to (default: all)")
	cbor := fs.Bool("cbor", false, "ask the daemon for the length-prefixed CBOR encoding")
	dev := fs.String("serial", "", "read COBS+CRC framed records from this serial port instead of the socket")
	baud := fs.Int("baud", 115200, "serial baud rate (with -serial)")
	file := fs.String("file", "", "read records from a capture file instead (NDJSON, CBOR or serial frames)")
	framing := fs.String("framing", "auto", "framing of -file: auto (NDJSON or CBOR), ndjson, cbor, cobs-cbor")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var next func(*stream.Message) error
	var stats func() stream.DecoderStats
	var source string
	switch {
	case *dev != "":
		port, err := serialsink.OpenReader(*dev, *baud)
		if err != nil {
			fmt.Fprintf(stderr, "edged tail: %v\n", err)
			return exitFailure
		}
		defer port.Close()
		context.AfterFunc(ctx, func() { port.Close() })
		dec := stream.NewDecoder(port, stream.DecoderOptions{Framing: stream.FramingSerial})
		next, stats, source = dec.Next, dec.Stats, *dev
	case *file != "":
		fr, err := stream.ParseFraming(*framing)
		if err != nil {
			fmt.Fprintf(stderr, "edged tail: %v\n", err)
			return exitUsage
		}
		f, err := os.Open(*file)
		if err != nil {
			fmt.Fprintf(stderr, "edged tail: %v\n", err)
			return exitFailure
		}
		defer f.Close()
		dec := stream.NewDecoder(f, stream.DecoderOptions{Framing: fr})
		next, stats, source = dec.Next, dec.Stats, *file
	default:
		var sub *stream.Subscription
		if *pipelines != "" || *cbor {
			sub = &stream.Subscription{}
			if *pipelines != "" {
				sub.Pipelines = strings.Split(*pipelines, ",")
			}
			if *cbor {
				sub.Encoding = stream.CBOR
			}
		}
		path, err := clientSocket(*sock)
		if err != nil {
			fmt.Fprintf(stderr, "edged tail: %v\n", err)
			return exitFailure
		}
		c, err := stream.Dial(ctx, path, sub)
		if err != nil {
			fmt.Fprintf(stderr, "edged tail: %v\n", err)
			return exitFailure
		}
		defer c.Close()
		next, stats, source = c.Next, c.Stats, path
	}

	return printTail(ctx, tailOutput{stdout: stdout, stderr: stderr, n: *n, json: *asJSON, daemon: *dev == "" && *file == "", live: *file == ""}, next, stats, source)
}

// tailOutput is how tail prints: where, how many records (0: until the
// stream ends), as raw JSON or as text; whether the records come from the
// daemon's socket (an error record is its refusal) and live (each is
// shown as it comes).
type tailOutput struct {
	stdout, stderr io.Writer
	n              int
	json           bool
	daemon, live   bool
}

// printTail prints the records next reads from source until the stream
// ends, ctx is done or o.n were printed, then what the decoder lost (its
// stats); it returns tail's exit code.
func printTail(ctx context.Context, o tailOutput, next func(*stream.Message) error, stats func() stream.DecoderStats, source string) int {
	out := bufio.NewWriter(o.stdout)
	defer out.Flush()
	var m stream.Message
	var line []byte
	count := 0
	code := exitOK
	for o.n == 0 || count < o.n {
		err := next(&m)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				break
			}
			fmt.Fprintf(o.stderr, "edged tail: %s: %v\n", source, err)
			code = exitFailure
			break
		}
		if m.Rec.Type == "error" && o.daemon {
			// The daemon refused the connection (too many clients, not
			// allowed) or tail's subscription: not a record to print.
			fmt.Fprintf(o.stderr, "edged tail: %s: the daemon refused: %s\n", source, m.Rec.Error)
			code = exitFailure
			break
		}
		count++
		if o.json {
			if m.Missed > 0 {
				fmt.Fprintf(o.stderr, "edged tail: %d record(s) lost before seq %d\n", m.Missed, m.Rec.Seq)
			}
			out.Write(m.JSON())
			out.WriteByte('\n')
		} else {
			line = stream.AppendText(line[:0], &m)
			line = append(line, '\n')
			out.Write(line)
		}
		if o.live {
			out.Flush() // live stream (socket or serial line): show each record as it comes
		}
	}
	out.Flush()
	st := stats()
	if st.Missed > 0 || st.CRCErrors > 0 || st.FrameErrors > 0 {
		fmt.Fprintf(o.stderr, "edged tail: %d records, %d lost in %d gap(s), %d CRC errors, %d bad frames\n",
			st.Records, st.Missed, st.Gaps, st.CRCErrors, st.FrameErrors)
	}
	return code
}

func cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("reload", stderr)
	sock := fs.String("socket", "", socketFlagHelp)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the daemon's answer")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	path, err := clientSocket(*sock)
	if err != nil {
		fmt.Fprintf(stderr, "edged reload: %v\n", err)
		return exitFailure
	}
	if err := stream.RequestReload(ctx, path); err != nil {
		fmt.Fprintf(stderr, "edged reload: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, "edged: engine files are being re-checked; reload outcomes appear as status records (edged tail) and in the log")
	return exitOK
}

// systemSocket is where the shipped edged.socket unit listens (a variable
// for tests).
var systemSocket = "/run/edged/edged.sock"

const socketFlagHelp = "daemon socket (default: $XDG_RUNTIME_DIR/edged.sock, or ./edged.sock without XDG_RUNTIME_DIR, where edged run listens; else /run/edged/edged.sock, the systemd unit's, if it exists)"

// clientSocket picks the socket tail and reload talk to: the -socket flag,
// else the first that exists of the daemon's own default (where `edged run`
// without a config listens) and the systemd unit's socket. With neither
// there, the error names both.
func clientSocket(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	def := socketsink.DefaultPath()
	for _, p := range []string{def, systemSocket} {
		if st, err := os.Stat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no daemon socket at %s (where edged run listens by default) or %s (the systemd unit's); is edged running? Name another socket with -socket PATH", def, systemSocket)
}
