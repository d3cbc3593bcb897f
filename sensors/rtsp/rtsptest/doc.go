// Package rtsptest holds the RTSP cameras sensors/rtsp is tested (and
// benchmarked) against: GStreamer's RTSP server (gst-rtsp-server through
// Python, rtsp_server.py: live test patterns in H.264 or H.265, restarts,
// a mid-stream resize, a camera that stops sending, one that never answers,
// passwords), a server of this package on gortsplib that loops encoded
// access units from a file (known content to compare decoded frames with;
// sender reports on or off; what RTCP it receives), and random UDP loss
// made with nftables in a network namespace of the test's own.
//
// Tests skip cleanly where GStreamer (or root, for the namespace) is
// missing, unless EDGED_REQUIRE_GSTREAMER=1 (CI) makes that a failure.
package rtsptest
