// Command rtspbench measures the network camera source (sensors/rtsp with
// sensors/avcodec) against FFmpeg on the same stream and machine, in one
// invocation, for docs/PERFORMANCE.md:
//
//	rtspbench cost      CPU time per frame: the ffmpeg program
//	                    (ffmpeg -rtsp_transport tcp -i rtsp://… -f null -)
//	                    and edged's source, run one after the other in rounds
//	                    on a stream served by another process
//	rtspbench streams   how many 1080p30 streams one process of edged's
//	                    source decodes in real time on this machine
//	rtspbench recovery  the time from a restarted server's first accept to
//	                    the first frame, over many restarts, with the capture
//	                    loop's backoff (internal/backoff.Restart)
//
// The stream is an Annex-B H.264 file (-file), served over RTSP by this
// command itself (rtspbench serve, a child process: sensors/rtsp/rtsptest's
// file server, paced at 30 frames a second, looping). -gen DIR makes the
// file with the ffmpeg program the way docs/PERFORMANCE.md's was made.
// The edged side runs as a child too (rtspbench client), so the CPU time
// of each side is a process's own (getrusage of the child).
package main
