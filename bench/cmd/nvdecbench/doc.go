// Command nvdecbench measures NVDEC (sensors/nvdec) on a machine with an
// NVIDIA GPU and its driver: N simultaneous 1080p30 streams, each replayed
// from an Annex-B file (-file) at its frame rate (-fps; no network), each
// with its own decoder writing every picture device to device into a frame
// buffer in GPU memory as the network camera source does, for N in -streams
// until frames drop. Per N it prints the pictures decoded, the pictures
// dropped (a stream more than -backlog pictures behind its schedule drops
// up to its next key picture, as the source's access unit buffers would
// overflow), the host CPU time per stream (getrusage of this process over
// the run, divided by N) and the latency of each picture from its
// scheduled arrival to its copy in the frame buffer, p50 and p99. Before
// each timed run every decoder decodes the stream's first GOP as fast as
// it can (the decoder is made at the first SPS, which the driver
// serialises across decoders: a camera's connect, not its steady state);
// the warm-up column says how long that took for all N. First it decodes
// one stream as fast as it can (-unpaced pictures) for NVDEC's throughput.
//
//	nvdecbench -file h264_1080p30_gop30.h264 -streams 1,2,4,8,16,32,48,64,96 -seconds 10
package main
