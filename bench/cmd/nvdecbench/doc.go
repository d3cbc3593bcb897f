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
// With -ffmpeg, each count is then measured again with the baseline in the
// same invocation: N ffmpeg processes (`-hwaccel cuda
// -hwaccel_output_format cuda`, so NVDEC decodes and the pictures stay on
// the GPU; once per -ffmpeg-threads value), each fed the same stream
// through its stdin on the same schedule with an access unit delimiter
// after each picture (so ffmpeg's parser need not wait for the next one),
// each writing a framecrc line a picture; latency is from a picture's
// scheduled arrival to its line, host CPU is the processes' own
// (/proc/PID/stat over the run), and a line under each row gives the
// ratios to NVDEC's row. -nvdec=false measures only the baseline, and
// -ffmpeg-hwaccel=false decodes it on the CPU (for a machine without a GPU).
// bench/ffmpegnvdec builds the minimal ffmpeg for a GPU machine that has
// none and runs both sides there.
//
//	nvdecbench -file h264_1080p30_gop30.h264 -streams 1,2,4,8,16,32,48,64,96 -seconds 10
//	nvdecbench -file h264_1080p30_gop30.h264 -streams 1,16,64,128 -seconds 5 -all -ffmpeg ./ffmpeg -ffmpeg-threads auto,1
package main
