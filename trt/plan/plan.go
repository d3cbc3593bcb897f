package plan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/edged-dev/edged/trt"
)

// HeaderSize is the number of bytes of a plan header that are read.
const HeaderSize = 28

// Magic is the first little-endian uint32 of every TensorRT plan: "ftrt".
const Magic uint32 = 0x74727466

// maxMetadata bounds the JSON metadata of a wrapped engine; Ultralytics
// metadata is a few kilobytes, so anything near this is not metadata.
const maxMetadata = 16 << 20

// Version is a TensorRT version. Build is 0 where it is not known (library
// versions from getInferLibVersion carry no build number).
type Version struct {
	Major, Minor, Patch, Build int
}

// String formats v as major.minor.patch, plus .build when it is known.
func (v Version) String() string {
	if v.Build == 0 {
		return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	}
	return fmt.Sprintf("%d.%d.%d.%d", v.Major, v.Minor, v.Patch, v.Build)
}

// IsZero reports whether v is unknown.
func (v Version) IsZero() bool { return v == Version{} }

// Less orders versions by major, minor and patch (not build).
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// VersionFromInt decodes the integer that getInferLibVersion returns and
// NV_TENSORRT_VERSION holds: MAJOR*1000 + MINOR*100 + PATCH up to TensorRT 8,
// MAJOR*10000 + MINOR*100 + PATCH from TensorRT 9 on.
func VersionFromInt(n int) Version {
	if n <= 0 {
		return Version{}
	}
	if n < 10000 {
		return Version{Major: n / 1000, Minor: n % 1000 / 100, Patch: n % 100}
	}
	return Version{Major: n / 10000, Minor: n % 10000 / 100, Patch: n % 100}
}

// Metadata is what an Ultralytics exporter writes in front of the plan,
// decoded as every backend's metadata is (trt.DecodeMetadata).
type Metadata = trt.Metadata

// File is a checked engine file.
type File struct {
	// Plan is the serialized TensorRT engine, a sub-slice of the input.
	Plan []byte
	// Offset is where Plan starts in the file: 0, or 4 plus the length of
	// the metadata of a wrapped file.
	Offset int
	// Built is the TensorRT version recorded in header bytes 24..27.
	Built Version
	// Metadata is the decoded wrapper metadata, nil for a bare plan.
	Metadata *Metadata
}

// Options control the version comparison of [Check].
type Options struct {
	// Library is the version of the loaded libnvinfer; zero skips the
	// version comparison.
	Library Version
	// VersionCompatible states that the engine was built with
	// --versionCompatible (the model's `version_compatible = true`); the
	// header does not record it.
	VersionCompatible bool
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", trt.ErrEngineInvalid, fmt.Sprintf(format, args...))
}

// Parse checks the structure of an engine file and unwraps an Ultralytics
// wrapper. Every error wraps trt.ErrEngineInvalid.
func Parse(b []byte) (*File, error) {
	switch {
	case len(b) == 0:
		return nil, invalid("the file is empty: it was probably still being written, or the export failed; " +
			"write engines to a temporary name and rename them into place")
	case len(b) < 4:
		return nil, invalid("the file is %d bytes, shorter than a %d-byte TensorRT plan header: truncated? copy or rebuild it", len(b), HeaderSize)
	}
	if binary.LittleEndian.Uint32(b) == Magic {
		return parsePlan(b, 0, nil)
	}
	if n := int32(binary.LittleEndian.Uint32(b)); n > 0 && len(b) > 4 && b[4] == '{' {
		return parseWrapped(b, int(n))
	}
	return nil, invalid("the file does not start with the TensorRT plan magic \"ftrt\" (it starts with %s)%s; "+
		"it is not a serialized TensorRT engine: build one on this device with trtexec --onnx=MODEL.onnx --saveEngine=MODEL.engine",
		quoteStart(b), hint(b))
}

func parseWrapped(b []byte, n int) (*File, error) {
	if n > maxMetadata || 4+n > len(b) {
		return nil, invalid("the file starts like an Ultralytics engine with %d bytes of JSON metadata, but it is only %d bytes long: "+
			"truncated? copy or export it again", n, len(b))
	}
	raw := b[4 : 4+n]
	md, err := decodeMetadata(raw)
	if err != nil {
		return nil, invalid("the file starts like an Ultralytics engine, but its %d-byte metadata is not valid: %v; "+
			"export it again, or strip the wrapper and keep the bare plan", n, err)
	}
	rest := b[4+n:]
	if len(rest) < 4 || binary.LittleEndian.Uint32(rest) != Magic {
		return nil, invalid("the Ultralytics metadata (%d bytes) is not followed by a TensorRT plan (found %s at offset %d)%s; "+
			"export the engine again", n, quoteStart(rest), 4+n, hint(rest))
	}
	return parsePlan(rest, 4+n, md)
}

func parsePlan(p []byte, off int, md *Metadata) (*File, error) {
	where := ""
	if md != nil {
		where = fmt.Sprintf(" after %d bytes of Ultralytics metadata", off)
	}
	if len(p) < HeaderSize {
		return nil, invalid("the TensorRT plan%s is %d bytes, shorter than its %d-byte header: truncated? copy or rebuild it", where, len(p), HeaderSize)
	}
	if w := binary.LittleEndian.Uint32(p[4:]); w != 0 {
		return nil, invalid("the TensorRT plan%s has header word 1 = %d, not 0: a serialization layout edged does not know "+
			"(from an unknown TensorRT, or corrupt); rebuild the engine on this device with trtexec", where, w)
	}
	return &File{
		Plan:     p,
		Offset:   off,
		Built:    Version{Major: int(p[24]), Minor: int(p[25]), Patch: int(p[26]), Build: int(p[27])},
		Metadata: md,
	}, nil
}

// Sniff checks what the first bytes of an engine file can show, before the
// file is read whole: head is its first bytes (trt.SniffBytes of them, or
// all), size its length. A file that head holds whole gets Parse; of a
// larger one, the magic, header word 1 and, for an Ultralytics-wrapped
// file, the metadata length against the file size and the plan header
// after the metadata when head reaches it. Errors wrap trt.ErrEngineInvalid.
func Sniff(head []byte, size int64) error {
	if int64(len(head)) >= size || len(head) < HeaderSize {
		_, err := Parse(head[:min(int64(len(head)), size)])
		return err
	}
	if binary.LittleEndian.Uint32(head) == Magic {
		_, err := parsePlan(head, 0, nil)
		return err
	}
	if n := int64(int32(binary.LittleEndian.Uint32(head))); n > 0 && head[4] == '{' {
		if n > maxMetadata || 4+n+HeaderSize > size {
			return invalid("the file starts like an Ultralytics engine with %d bytes of JSON metadata and a plan after them, but it is only %d bytes long: "+
				"truncated? copy or export it again", n, size)
		}
		if 4+n+HeaderSize <= int64(len(head)) {
			_, err := parseWrapped(head, int(n))
			return err
		}
		return nil
	}
	_, err := Parse(head)
	return err
}

// Compatible reports whether an engine built by f.Built can be loaded by
// the library version in opts. Errors wrap trt.ErrVersion.
func (f *File) Compatible(opts Options) error {
	lib, built := opts.Library, f.Built
	if lib.IsZero() || lib.Less(Version{Major: 8, Minor: 6}) {
		// TensorRT before 8.6 does not record its version in the header.
		return nil
	}
	if opts.VersionCompatible {
		switch {
		case built.Major == lib.Major && built.Minor <= lib.Minor:
			return nil
		case built.Major == 8 && built.Minor >= 6 && lib.Major == 10:
			return nil
		case built.Major == 10 && lib.Major == 11:
			return nil
		}
		return fmt.Errorf("%w: the engine was built version-compatible by TensorRT %s, which the loaded TensorRT %s cannot run "+
			"(version-compatible engines run on later minors of the same major, 8.6 engines also on 10, 10 engines on 11); "+
			"rebuild it on this device: trtexec --onnx=MODEL.onnx --saveEngine=MODEL.engine", trt.ErrVersion, built, lib)
	}
	if built.Major == lib.Major && built.Minor == lib.Minor {
		return nil
	}
	return fmt.Errorf("%w: the engine was built by TensorRT %s, but the loaded library is TensorRT %s, and an engine only "+
		"runs on the TensorRT major.minor that built it; rebuild it on this device: trtexec --onnx=MODEL.onnx --saveEngine=MODEL.engine "+
		"(or build it with --versionCompatible and set version_compatible = true for the model)", trt.ErrVersion, built, lib)
}

// Check parses an engine file and checks it against the loaded library.
// Errors wrap trt.ErrEngineInvalid or trt.ErrVersion.
func Check(b []byte, opts Options) (*File, error) {
	f, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if err := f.Compatible(opts); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeMetadata reads the JSON object of an Ultralytics wrapper. A value
// of a known key that cannot be read makes the wrapper invalid: it was
// written by a program, so a broken one means a broken export.
func decodeMetadata(raw []byte) (*Metadata, error) {
	var values map[string]any
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, err
	}
	if values == nil {
		return nil, fmt.Errorf("want a JSON object, got null")
	}
	md, errs := trt.DecodeMetadata(trt.FromEngineHeader, values)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return md, nil
}

// quoteStart shows the first bytes of b for a message.
func quoteStart(b []byte) string {
	n := min(len(b), 8)
	return fmt.Sprintf("%q", b[:n])
}

// hint names the format a non-plan file most likely is.
func hint(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("version https://git-lfs")):
		return " (a Git LFS pointer: run git lfs pull to fetch the real file)"
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return " (a zip archive, such as a PyTorch .pt checkpoint)"
	case bytes.Contains(b[:min(len(b), 64)], []byte("onnx")) || len(b) > 1 && b[0] == 0x08 && b[1] < 0x20:
		return " (it looks like an ONNX model: give it the .onnx extension to run it with ONNX Runtime)"
	case bytes.HasPrefix(b, []byte("trtf")):
		return " (the magic reversed: written by a tool with the wrong byte order)"
	}
	return ""
}
