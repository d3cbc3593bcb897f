#!/usr/bin/env python3
"""The Python side of edged's side-by-side benchmark (bench/README.md).

The loop as users write it: OpenCV + NumPy + onnxruntime, one frame at a
time, results as JSON lines on a Unix socket.

    read frame i of an EDGEDRAW replay file (YUYV)
    cv2.cvtColor(COLOR_YUV2RGB_YUYV), cv2.resize(INTER_LINEAR)
    float32 / 255, - mean, / std, HWC -> CHW
    sess.run
    top-5, json.dumps, sendall

It listens on --socket, waits for one client (the harness), then loops over
the file's frames (rewinding at the end) until --duration or --count, or
until killed. With --fps it takes a frame at most that often, as a camera's
blocking read would hand them out; the wait is before t_start and not timed. Every result line carries latency_us in microseconds, timed
with time.perf_counter_ns:

    fill   reading the frame from the file into the buffer
    pre    colour conversion, resize, normalisation, layout
    infer  sess.run
    post   top-5 from the output
    total  from before reading the frame to the end of post
    encode json.dumps + sendall of the PREVIOUS frame's line (a line cannot
           carry its own send time); absent on the first line

--pre-only does not import onnxruntime: fill, pre, total (= fill + pre).

Only the standard library, cv2, numpy and onnxruntime are used.
"""

import argparse
import json
import os
import signal
import socket
import struct
import sys
import time

import cv2
import numpy as np

MAGIC = b"EDGEDRAW"
HEADER = struct.Struct("<8sIIIIII")  # magic version width height fourcc stride fps_milli
RECORD = struct.Struct("<IIq")  # length flags delta_ns
YUYV = int.from_bytes(b"YUYV", "little")

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replay", required=True, help="EDGEDRAW file of YUYV frames (benchgen)")
    p.add_argument("--model", help="ONNX model (not needed with --pre-only)")
    p.add_argument("--socket", required=True, help="Unix socket path to listen on")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra_op_num_threads (edged's model threads)")
    p.add_argument("--size", type=int, default=224, help="model input width and height")
    p.add_argument("--pre-only", action="store_true", help="preprocess only; onnxruntime is not imported")
    p.add_argument("--duration", type=float, default=0, help="seconds to run after the client connects; 0 = until killed")
    p.add_argument("--count", type=int, default=0, help="frames to process; 0 = no limit")
    p.add_argument("--fps", type=float, default=0,
                   help="take a frame at most this often, as a camera's blocking read would (the wait is not timed); 0 = as fast as it goes")
    p.add_argument("--cv-threads", type=int, default=None, help="cv2.setNumThreads(N); default: OpenCV's own choice")
    p.add_argument("--provider", default="CPUExecutionProvider", help="onnxruntime execution provider")
    return p.parse_args()


class Replay:
    """Frames of an EDGEDRAW file, read into one preallocated buffer."""

    def __init__(self, path):
        self.f = open(path, "rb", buffering=0)
        hdr = self.f.read(HEADER.size)
        magic, version, w, h, fourcc, stride, _ = HEADER.unpack(hdr)
        if magic != MAGIC or version != 1:
            sys.exit(f"{path}: not an EDGEDRAW version 1 file")
        if fourcc != YUYV or stride not in (0, 2 * w):
            sys.exit(f"{path}: only packed YUYV is supported")
        self.w, self.h = w, h
        self.buf = bytearray(2 * w * h)
        self.view = memoryview(self.buf)
        self.rec = bytearray(RECORD.size)
        self.frames = 0  # frames in the file, learnt on the first pass

    def read(self):
        """Reads the next frame (rewinding at the end) into self.buf."""
        if self.f.readinto(self.rec) != RECORD.size:
            self.f.seek(HEADER.size)
            if self.f.readinto(self.rec) != RECORD.size:
                sys.exit("replay file has no frames")
        n, _, _ = RECORD.unpack(self.rec)
        if n != len(self.buf):
            sys.exit(f"frame of {n} bytes, expected {len(self.buf)}")
        got = 0
        while got < n:
            k = self.f.readinto(self.view[got:n])
            if not k:
                sys.exit("truncated frame")
            got += k
        return np.frombuffer(self.buf, dtype=np.uint8).reshape(self.h, self.w, 2)


def preprocess(yuyv, size):
    rgb = cv2.cvtColor(yuyv, cv2.COLOR_YUV2RGB_YUYV)
    img = cv2.resize(rgb, (size, size), interpolation=cv2.INTER_LINEAR)
    x = img.astype(np.float32) / 255.0
    x = (x - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))[np.newaxis]


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.cv_threads is not None:
        cv2.setNumThreads(args.cv_threads)
    replay = Replay(args.replay)

    info = {"python": sys.version.split()[0], "cv2": cv2.__version__, "numpy": np.__version__,
            "cv_threads": cv2.getNumThreads(), "pre_only": args.pre_only, "pid": os.getpid()}
    sess = None
    if not args.pre_only:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(args.model, sess_options=so, providers=[args.provider])
        input_name = sess.get_inputs()[0].name
        output_name = sess.get_outputs()[0].name
        info.update(onnxruntime=ort.__version__, providers=sess.get_providers(), ort_threads=args.threads)
        # Warm up once, as edged does when it loads an engine.
        sess.run(None, {input_name: preprocess(replay.read(), args.size)})
        replay.f.seek(HEADER.size)

    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(args.socket)
    srv.listen(1)
    conn, _ = srv.accept()
    try:
        status = {"type": "status", "v": 1, "seq": 1, "event": "pyloop_info", "info": info}
        conn.sendall((json.dumps(status) + "\n").encode())
        run(args, replay, sess, conn)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        conn.close()
        srv.close()
        try:
            os.unlink(args.socket)
        except FileNotFoundError:
            pass


def run(args, replay, sess, conn):
    clock = time.perf_counter_ns
    if sess is not None:
        input_name = sess.get_inputs()[0].name
    end = time.monotonic() + args.duration if args.duration > 0 else None
    seq, frame, encode_us = 1, 0, None
    period = int(1e9 / args.fps) if args.fps > 0 else 0
    due = clock()
    while (args.count == 0 or frame < args.count) and (end is None or time.monotonic() < end):
        if period:
            now = clock()
            if due > now:
                time.sleep((due - now) / 1e9)
            due += period
            if clock() - due > period:
                due = clock()  # fell behind: do not burst
        t0 = clock()
        yuyv = replay.read()
        t1 = clock()
        x = preprocess(yuyv, args.size)
        t2 = clock()
        lat = {"fill": (t1 - t0) // 1000, "pre": (t2 - t1) // 1000}
        rec = {"type": "result", "v": 1, "seq": seq + 1, "pipeline": "pyloop", "frame_seq": frame, "t_capture_ns": t0}
        if sess is not None:
            probs = sess.run(None, {input_name: x})[0][0]
            t3 = clock()
            top = np.argsort(probs)[::-1][:5]
            classes = [{"index": int(i), "label": "", "score": float(probs[i])} for i in top]
            t4 = clock()
            lat.update(infer=(t3 - t2) // 1000, post=(t4 - t3) // 1000, total=(t4 - t0) // 1000)
            rec["outputs"] = {"probs": {"top": classes}}
        else:
            lat["total"] = (t2 - t0) // 1000
        if encode_us is not None:
            lat["encode"] = encode_us
        rec["latency_us"] = lat
        t5 = clock()
        conn.sendall((json.dumps(rec) + "\n").encode())
        encode_us = (clock() - t5) // 1000
        seq += 1
        frame += 1


if __name__ == "__main__":
    main()
