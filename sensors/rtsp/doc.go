// Package rtsp is the network camera source: a sensors.Source that plays
// an RTSP stream of H.264 or H.265 video (gortsplib's client: DESCRIBE,
// SETUP, PLAY over TCP, UDP, or UDP falling back to TCP), depacketizes it
// with sensors/h26x, decodes every picture with a Decoder (declared here,
// by its consumer: sensors/avcodec on the CPU, sensors/nvdec on a discrete
// GPU) and delivers the pictures, as NV12, in slots leased from the
// caller's pool; a decoder whose pictures are on the GPU (a DeviceWriter)
// writes them device to device into slots the GPU addresses. Width, height and codec come from the stream (the SDP and every
// SPS), never from configuration.
//
// # One session per Start
//
// Start connects, plays and opens a decoder; Next delivers frames until
// the session ends, then returns an error wrapping sensors.ErrDeviceGone
// with the reason (the server closed the connection, a timeout, no video
// for Options.Timeout); the caller (runtime's capture loop) publishes
// source_down, closes the source and starts it again after its capped,
// jittered backoff, forever, and publishes source_up when a Start
// succeeds. Nothing of a session survives it: its decoder, its access
// units and its pending pictures are discarded at Close, so no frame of
// an old session is ever served after a new one starts, and no frame is
// served twice. A camera that keeps its session open but stops sending
// video (gortsplib's own timeout is reset by the RTCP such a camera still
// sends) is caught by this package's watchdog on the time since the last
// video packet. Each source has its own client, goroutines, buffers and
// decoder: one dead camera never slows another.
//
// # Nothing corrupt is decoded
//
// After any RTP sequence gap, broken fragment or overrun, h26x drops
// every access unit until the next random access point; a picture the
// decoder fails on makes this source drop the pictures until the next key.
// Each dropped picture is one Next that returns an error wrapping
// sensors.ErrSkipped (the pipeline counts it as corrupt), so the capture
// loop also sees progress while a stream recovers. Stats counts them by
// reason.
//
// # Capture time
//
// A frame's TCapture is the camera's sampling time when the camera sends
// RTCP sender reports: the RTP timestamp's distance from the last report's,
// added to the report's arrival on CLOCK_MONOTONIC (Frame.Clock =
// sensors.ClockSenderReport; never after the frame's arrival); before the
// first report, or when a mapped time is more than 20 ms after the frame's
// arrival or more than 2 s before it, the arrival of the frame's first
// packet (sensors.ClockArrival).
//
// # Geometry changes
//
// A new SPS mid-stream with another size is followed: frames carry their
// own Format, and the pipeline's preprocessing re-plans per format. When
// the new size no longer fits the slots the source was started with, Next
// (or Start) returns an error wrapping sensors.ErrGeometry and SlotSize
// reports what a slot must hold. Another codec after a reconnect is
// simply the next session's. What edged cannot decode (4:2:2, 4:4:4, more
// than 8 bits, a size over h26x.MaxDimension) is refused with an error
// wrapping sensors.ErrFormat, never passed to the decoder.
//
// # Credentials
//
// The URL carries none: Options.Username and Options.Password (the
// contents of a password file) are set on the request URL in memory only.
// Every error and description this package produces has credentials
// removed; errors of the RTSP library are turned into text (scrubbed) and
// wrapped around this package's and sensors' sentinels.
//
// # Allocations
//
// From an *rtp.Packet to a frame in its slot nothing is allocated in steady
// state. gortsplib's receive path itself allocates about 5 objects per RTP
// packet over TCP and 6 over UDP (its buffers, header and reorder slices;
// about 2,000 a second for a 1080p30 stream), which no option of v5.6.4
// turns off.
package rtsp
