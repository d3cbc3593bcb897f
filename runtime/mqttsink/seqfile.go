package mqttsink

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"time"
)

// The seq file, "seq" in the queue's folder, is the sink's high-water
// mark: no seq the sink handed out is above the value it holds. While the
// sink runs it holds a reservation (seqs are taken in blocks of
// reserveBlock, each written and fsynced before the first of them is
// queued); a clean stop replaces it with the last seq queued. It has two
// 32-byte slots, written in turn, so a write torn by a power cut leaves
// the other one:
//
//	magic    "EDSQ"
//	version  1 (one byte)
//	flags    bit 0: clean stop (the value is the last seq, not a reservation)
//	         (one byte), then 2 zero bytes
//	seq      uint64 big-endian
//	written  int64 big-endian: the wall clock when written, ns since 1970
//	gen      uint32 big-endian: which write this is (the larger wins)
//	crc      uint32 big-endian: CRC-32C of the 28 bytes before it
//
// What it is for, and what it cannot do: docs/PROTOCOL.md, "Sequence
// numbers and loss".

const (
	seqName      = "seq"
	seqSlot      = 32
	seqMagic     = "EDSQ"
	reserveBlock = 1 << 16
)

// seqState is one slot of the seq file.
type seqState struct {
	seq     uint64
	clean   bool
	written time.Time
	gen     uint32
}

func encodeSeqState(st seqState) []byte {
	b := make([]byte, 0, seqSlot)
	b = append(b, seqMagic...)
	flags := byte(0)
	if st.clean {
		flags = 1
	}
	b = append(b, 1, flags, 0, 0)
	b = binary.BigEndian.AppendUint64(b, st.seq)
	b = binary.BigEndian.AppendUint64(b, uint64(st.written.UnixNano()))
	b = binary.BigEndian.AppendUint32(b, st.gen)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeSeqState(b []byte) (seqState, bool) {
	if len(b) < seqSlot || string(b[:4]) != seqMagic || b[4] != 1 ||
		crc32.Checksum(b[:seqSlot-4], castagnoli) != binary.BigEndian.Uint32(b[seqSlot-4:]) {
		return seqState{}, false
	}
	return seqState{
		seq:     binary.BigEndian.Uint64(b[8:]),
		clean:   b[5]&1 != 0,
		written: time.Unix(0, int64(binary.BigEndian.Uint64(b[16:]))),
		gen:     binary.BigEndian.Uint32(b[24:]),
	}, true
}

// readSeqState returns the newest intact slot of f; ok is false when
// neither slot is intact (a new file, or both torn).
func readSeqState(f *os.File) (st seqState, ok bool) {
	b := make([]byte, 2*seqSlot)
	n, _ := f.ReadAt(b, 0)
	for i := 0; i+seqSlot <= n; i += seqSlot {
		if s, good := decodeSeqState(b[i : i+seqSlot]); good && (!ok || s.gen > st.gen) {
			st, ok = s, true
		}
	}
	return st, ok
}

// writeSeqState writes st into the slot its gen selects and fsyncs it.
func writeSeqState(f *os.File, st seqState) error {
	if _, err := f.WriteAt(encodeSeqState(st), int64(st.gen%2)*seqSlot); err != nil {
		return err
	}
	return f.Sync()
}
