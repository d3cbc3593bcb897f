#!/usr/bin/python3
"""Test RTSP server for edged's rtsp source (Debian 12: GStreamer 1.22, python3-gi,
gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-{good,ugly,bad}). sensors/rtsp/rtsptest starts it
for the tests; it runs by hand as well (the examples below).

Modes:
  serve   (default) GStreamer gst-rtsp-server, live videotestsrc -> x264enc/x265enc -> rtph26xpay.
  silent  plain TCP socket that accepts connections, reads requests, never answers (DESCRIBE hangs).

Examples:
  rtsp_server.py --codec h264 --width 1920 --height 1080 --fps 30 --gop 30 --port 8554
  rtsp_server.py --codec h265 --user cam --password secret
  rtsp_server.py --resize-after 3 --resize-to 1280x720     # resolution change mid-stream
  rtsp_server.py --stall-after 5                            # stops sending, keeps the session open
  rtsp_server.py --mode silent --port 8555

Prints "READY rtsp://127.0.0.1:PORT/PATH" on stdout (flushed) once it listens.
"""
import argparse
import socket
import sys
import threading


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["serve", "silent"], default="serve")
    p.add_argument("--address", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8554)
    p.add_argument("--path", default="/cam")
    p.add_argument("--codec", choices=["h264", "h265"], default="h264")
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--gop", type=int, default=30, help="key-int-max (frames between IDRs)")
    p.add_argument("--bitrate", type=int, default=0, help="kbit/s; 0 = encoder default")
    p.add_argument("--preset", default="ultrafast", help="x264/x265 speed-preset (superfast: CABAC, Main/High-like)")
    p.add_argument("--bframes", type=int, default=0, help="x264 bframes (0 with tune=zerolatency)")
    p.add_argument("--pattern", default="smpte", help="videotestsrc pattern (ball moves; smpte is static)")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--protocols", choices=["all", "tcp", "udp"], default="all")
    p.add_argument("--not-shared", action="store_true", help="one pipeline per client")
    p.add_argument("--resize-after", type=float, default=0, help="seconds after first client, 0 = never")
    p.add_argument("--resize-to", default="1280x720")
    p.add_argument("--stall-after", type=float, default=0, help="seconds after first client: drop all buffers")
    return p.parse_args()


def run_silent(a):
    """Accept TCP, read whatever comes, never answer: a camera whose RTSP stack is wedged."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.address, a.port))
    srv.listen(16)
    print(f"READY rtsp://{a.address}:{srv.getsockname()[1]}{a.path}", flush=True)

    def hold(c):
        with c:
            while c.recv(4096):
                pass

    while True:
        c, _ = srv.accept()
        threading.Thread(target=hold, args=(c,), daemon=True).start()


def launch_string(a):
    caps = f"video/x-raw,format=I420,width={a.width},height={a.height},framerate={a.fps}/1"
    if a.codec == "h264":
        br = f" bitrate={a.bitrate}" if a.bitrate else ""
        enc = (f"x264enc tune=zerolatency speed-preset={a.preset} key-int-max={a.gop} "
               f"bframes={a.bframes}{br} ! video/x-h264,profile=high ! "
               f"rtph264pay name=pay0 pt=96 config-interval=-1")
    else:
        br = f" bitrate={a.bitrate}" if a.bitrate else ""
        enc = (f"x265enc tune=zerolatency speed-preset={a.preset} key-int-max={a.gop}{br} ! "
               f"rtph265pay name=pay0 pt=96 config-interval=-1")
    # valve: --stall-after sets drop=true (RTP stops, RTSP session and RTCP stay up).
    return (f"( videotestsrc is-live=true pattern={a.pattern} ! capsfilter name=cf caps={caps} ! "
            f"videoconvert ! valve name=valve drop=false ! {enc} )")


def run_serve(a):
    import gi
    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtsp", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtsp, GstRtspServer

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address(a.address)
    server.set_service(str(a.port))

    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(launch_string(a))
    factory.set_shared(not a.not_shared)
    prot = {"all": GstRtsp.RTSPLowerTrans.UDP | GstRtsp.RTSPLowerTrans.TCP,
            "tcp": GstRtsp.RTSPLowerTrans.TCP,
            "udp": GstRtsp.RTSPLowerTrans.UDP}[a.protocols]
    factory.set_protocols(prot)

    if a.user is not None:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string("media.factory.role", "user")
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(a.user, a.password or ""), token)
        server.set_auth(auth)
        factory.add_role_from_structure(Gst.Structure.new_from_string(
            "user, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"))

    def after(seconds, fn):
        GLib.timeout_add(int(seconds * 1000), lambda: (fn(), False)[1])

    def on_configure(_factory, media):
        pipe = media.get_element()
        if a.resize_after > 0:
            w, h = (int(x) for x in a.resize_to.split("x"))

            def resize():
                cf = pipe.get_by_name("cf")
                cf.set_property("caps", Gst.Caps.from_string(
                    f"video/x-raw,format=I420,width={w},height={h},framerate={a.fps}/1"))
                print(f"RESIZED {w}x{h}", flush=True)
            after(a.resize_after, resize)
        if a.stall_after > 0:
            def stall():
                pipe.get_by_name("valve").set_property("drop", True)
                print("STALLED", flush=True)
            after(a.stall_after, stall)

    factory.connect("media-configure", on_configure)
    server.get_mount_points().add_factory(a.path, factory)
    if server.attach(None) == 0:
        sys.exit(f"cannot listen on {a.address}:{a.port}")
    print(f"READY rtsp://{a.address}:{server.get_bound_port()}{a.path}", flush=True)
    GLib.MainLoop().run()


def main():
    a = parse_args()
    if a.mode == "silent":
        run_silent(a)
    else:
        run_serve(a)


if __name__ == "__main__":
    main()
