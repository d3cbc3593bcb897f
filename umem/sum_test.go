package umem

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// sumSource is the checksum kernel of the tests: each block adds up the
// 32-bit words of its share of p and writes one partial sum.
const sumSource = `
extern "C" __global__ void sum_u32(const unsigned int* __restrict__ p, unsigned long long nwords,
                                   unsigned long long* __restrict__ partials) {
    unsigned long long acc = 0;
    unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const uint4* p4 = (const uint4*)p;
    unsigned long long n4 = nwords / 4;
    for (unsigned long long i = tid; i < n4; i += stride) {
        uint4 v = p4[i];
        acc += (unsigned long long)v.x + v.y + v.z + v.w;
    }
    for (unsigned long long i = n4 * 4 + tid; i < nwords; i += stride) acc += p[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    __shared__ unsigned long long warpSums[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warpSums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = (threadIdx.x < (blockDim.x + 31) / 32) ? warpSums[lane] : 0;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) partials[blockIdx.x] = acc;
    }
}

// spin_until keeps its stream busy until *flag becomes non-zero (set by the
// host through mapped memory) or timeout_ns pass; *out says which.
extern "C" __global__ void spin_until(volatile unsigned int* flag, unsigned long long timeout_ns,
                                      unsigned int* out) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        if (*flag) { *out = 1; return; }
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < timeout_ns);
    *out = 2;
}
`

// checksumU32 is the CPU reference of sum_u32.
func checksumU32(b []byte) uint64 {
	var s uint64
	for i := 0; i+4 <= len(b); i += 4 {
		s += uint64(binary.NativeEndian.Uint32(b[i:]))
	}
	return s
}

// fillRandom writes random bytes (never all zeros: they hide unwritten data).
func fillRandom(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.NativeEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// sumRunner launches sum_u32 and reads its result from mapped memory.
type sumRunner struct {
	k           *Kernel
	partials    *Mem
	grid, block uint32
	args        Args
}

func newSumRunner(d *Device, m *Module, grid, block uint32) (*sumRunner, error) {
	k, err := m.Kernel("sum_u32")
	if err != nil {
		return nil, err
	}
	p, err := d.Alloc(int(grid)*8, MemOptions{Kind: KindMapped})
	if err != nil {
		return nil, err
	}
	return &sumRunner{k: k, partials: p, grid: grid, block: block}, nil
}

// run enqueues the kernel over n bytes at dptr on s; the partials buffer is
// the stream's until s is synchronized.
func (r *sumRunner) run(s *Stream, dptr uintptr, n int) error {
	if err := r.partials.Attach(s); err != nil {
		return err
	}
	h := r.partials.hostPtr()
	clear((*[1 << 20]byte)(h)[:r.partials.n]) // poison: a kernel that writes nothing fails
	r.args.Reset()
	r.args.Ptr(dptr)
	r.args.U64(uint64(n / 4))
	r.args.Ptr(r.partials.Device())
	if err := r.k.Launch(s, D1(r.grid), D1(r.block), 0, &r.args); err != nil {
		return err
	}
	return r.partials.Detach(s)
}

// result adds up the partial sums; the stream must be done.
func (r *sumRunner) result() (uint64, error) {
	b, err := r.partials.Host()
	if err != nil {
		return 0, err
	}
	var s uint64
	for i := 0; i < int(r.grid); i++ {
		s += binary.NativeEndian.Uint64(b[i*8:])
	}
	return s, nil
}

func (r *sumRunner) close() error { return r.partials.Release() }

// frameCycle is one frame through a placement: lease a slot, the CPU writes
// it, the uploader hands it to the stream, the kernel reads it, the frame
// comes back, and the checksum is compared.
func frameCycle(pool *Pool, up *Uploader, sr *sumRunner, s *Stream, src []byte, want uint64) error {
	slot, ok := pool.TryGet()
	if !ok {
		return fmt.Errorf("no free slot")
	}
	defer slot.Release()
	h, err := slot.Buffer().Host()
	if err != nil {
		return err
	}
	copy(h, src)
	dptr, err := up.Begin(slot.Buffer(), len(src))
	if err != nil {
		return err
	}
	if err := sr.run(s, dptr, len(src)); err != nil {
		return err
	}
	if err := up.End(); err != nil {
		return err
	}
	got, err := sr.result()
	if err != nil {
		return err
	}
	if got != want {
		return errChecksum
	}
	return nil
}

var errChecksum = fmt.Errorf("checksum mismatch")
