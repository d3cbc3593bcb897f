#!/bin/sh
# Prepares the folder run.sh runs from on a machine with an NVIDIA GPU:
# nvdecbench (cgo, built here), the minimal ffmpeg of build.sh (built here;
# needs glibc 2.35 or later there), its source and headers (run.sh builds
# them there when the carried binary does not run), and the 1080p30 H.264
# stream of docs/PERFORMANCE.md (rtspbench's, made with Debian's ffmpeg).
#
#   bench/ffmpegnvdec/prepare.sh DIR     # from the repository root; DIR git-ignored, e.g. .cache/hil
#
# Debian 12 with deb-src lines for bookworm (for apt-get source ffmpeg),
# gcc, make, nasm, ffmpeg with libx264; nothing of it is committed.
set -eu
dir=$1; mkdir -p "$dir/src"; dir=$(cd "$dir" && pwd)
repo=$(pwd); work=$repo/.cache/ffmpegnvdec; mkdir -p "$work"
cd "$work"
[ -d ffmpeg-5.1.9 ] || { apt-get source --download-only ffmpeg; tar xf ffmpeg_5.1.*.orig.tar.xz; }
[ -d nvh ] || { apt-get download libffmpeg-nvenc-dev; dpkg-deb -x libffmpeg-nvenc-dev_*.deb nvh; }
[ -x out/bin/ffmpeg ] || "$repo/bench/ffmpegnvdec/build.sh" ffmpeg-5.1.9 nvh/usr out
v=$(objdump -T out/bin/ffmpeg | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
echo "ffmpeg needs $v"
gzip -9c out/bin/ffmpeg > "$dir/ffmpeg.gz"
cp ffmpeg_5.1.*.orig.tar.xz "$dir/src/"
tar czf "$dir/src/nvh.tar.gz" -C nvh/usr include share/pkgconfig
cp "$repo/bench/ffmpegnvdec/build.sh" "$repo/bench/ffmpegnvdec/run.sh" "$dir/"
cd "$repo"
go build -o "$work/nvdecbench" ./bench/cmd/nvdecbench
gzip -9c "$work/nvdecbench" > "$dir/nvdecbench.gz"
f=$dir/h264_1080p30_gop30.h264
[ -f "$f" ] || ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 10 \
	-c:v libx264 -preset medium -profile:v high -pix_fmt yuv420p -g 30 -keyint_min 30 -sc_threshold 0 \
	-b:v 4M -maxrate 4M -bufsize 4M -bf 0 -bsf:v h264_mp4toannexb -f h264 "$f"
du -sh "$dir"
