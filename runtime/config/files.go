package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/internal/regfile"
)

// Limits on the files a configuration names that edged reads whole. A
// larger file is refused unread, with a problem naming it; so is a path
// that leads to anything but a regular file (a FIFO, a device such as
// /dev/zero, a directory), without blocking on it. Model files have their
// own limit, daemon.max_model_bytes.
const (
	// MaxFileBytes bounds the configuration file itself.
	MaxFileBytes = 1 << 20
	// MaxPasswordFileBytes bounds an MQTT sink's password_file.
	MaxPasswordFileBytes = confkeys.MaxPasswordFileBytes
	// MaxPEMFileBytes bounds an MQTT sink's ca_file, cert_file and
	// key_file (a bundle of every public root CA is about 220 KB).
	MaxPEMFileBytes = confkeys.MaxPEMFileBytes
)

// files holds what a Config has read of the files it names, by resolved
// path: each is read once per loaded configuration (CheckFiles, or the
// first ReadNamed), so the parts built from it and the comparison with
// the running configuration see the same bytes. A new load (SIGHUP)
// reads them again.
type files struct {
	mu sync.Mutex
	m  map[string]*namedFile
}

type namedFile struct {
	data []byte
	sum  [32]byte
	err  error
}

// ReadNamed returns the content of a file the configuration names (path as
// written in it, resolved against the configuration's folder), read at most
// once per Config through regfile with limit.
func (c *Config) ReadNamed(path string, limit int64) ([]byte, error) {
	f := c.named(c.Resolve(path), limit)
	return f.data, f.err
}

func (c *Config) named(path string, limit int64) *namedFile {
	if c.files == nil {
		c.files = &files{} // a Config built without Parse
	}
	c.files.mu.Lock()
	defer c.files.mu.Unlock()
	if f := c.files.m[path]; f != nil {
		return f
	}
	data, err := regfile.ReadFile(path, limit)
	f := &namedFile{data: data, err: err}
	if err == nil {
		f.sum = sha256.Sum256(data)
	}
	if c.files.m == nil {
		c.files.m = map[string]*namedFile{}
	}
	c.files.m[path] = f
	return f
}

// sinkFile is one file a sink names, with its key and limit.
type sinkFile struct {
	key, path string
	limit     int64
}

// files are the files s names, as its kind declares them (confkeys.SinkKind.Files).
func (s *Sink) files() []sinkFile {
	k, ok := findSinkKind(s.Kind)
	if !ok {
		return nil
	}
	var out []sinkFile
	for i, f := range k.Files {
		if p := reflect.ValueOf(s).Elem().FieldByIndex(k.files[i]).String(); p != "" {
			out = append(out, sinkFile{f.Key, p, f.Limit})
		}
	}
	return out
}

// SinkFiles identifies the content of the files sink s names (password
// and TLS files), as this configuration read them: two sinks with equal
// tables and equal SinkFiles are built the same way, so a reload that only
// changes what such a file holds replaces the sink.
func (c *Config) SinkFiles(s *Sink) string {
	var b strings.Builder
	for _, sf := range s.files() {
		f := c.named(c.Resolve(sf.path), sf.limit)
		if f.err != nil {
			fmt.Fprintf(&b, "%s=error %v;", sf.key, f.err)
			continue
		}
		fmt.Fprintf(&b, "%s=%s;", sf.key, hex.EncodeToString(f.sum[:]))
	}
	return b.String()
}
