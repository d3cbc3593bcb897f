#!/bin/sh
# On a machine with an NVIDIA GPU and its driver (libcuda, libnvcuvid), no
# Go, no ffmpeg needed: in one invocation, N simultaneous 1080p30 H.264
# streams decoded by sensors/nvdec (nvdecbench) and the same N streams each
# decoded by one `ffmpeg -hwaccel cuda -hwaccel_output_format cuda` fed on
# the same schedule, for N = 1, 16, 64, 128; ffmpeg with its default
# decoder threads and with -threads 1. Results go to $OUT (default ./out).
# The folder is made by prepare.sh. STREAMS (1,16,64,128), THREADS (auto,1)
# and STAGGER (0s: the time between two ffmpeg processes' first access
# units, when each makes its CUDA context) change the sweep; SMOKE=0 leaves
# the smoke test out.
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$here/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/nvidia/bin
w=$(mktemp -d)
gunzip -c "$here/nvdecbench.gz" > "$w/nvdecbench" && gunzip -c "$here/ffmpeg.gz" > "$w/ffmpeg" && chmod +x "$w/nvdecbench" "$w/ffmpeg" || exit 1
s=$here/h264_1080p30_gop30.h264
{ date -u; uname -a; ldd --version 2>&1 | head -1; nproc; ulimit -a; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv; } > "$OUT/env.txt" 2>&1
ff=$w/ffmpeg
if ! "$ff" -hide_banner -version > "$OUT/ffmpeg-version.txt" 2>&1; then
	echo "the carried ffmpeg does not run here: building it ($(nproc) jobs)" | tee -a "$OUT/ffmpeg-version.txt"
	mkdir -p "$w/src" "$w/nvh" && tar xf "$here"/src/ffmpeg_5.1.*.orig.tar.xz -C "$w/src" && tar xzf "$here/src/nvh.tar.gz" -C "$w/nvh" &&
		sh "$here/build.sh" "$w"/src/ffmpeg-5.1.* "$w/nvh" "$w/ff" > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
	ff=$w/ff/bin/ffmpeg
fi
[ "${SMOKE:-1}" = 0 ] || {
echo "== smoke: ffmpeg's pictures are CUDA frames (hwdownload refuses any other), one stream unpaced" > "$OUT/smoke.txt"
for t in auto 1; do
	echo "-- threads $t, hwdownload" >> "$OUT/smoke.txt"
	"$ff" -hide_banner -benchmark -hwaccel cuda -hwaccel_output_format cuda -threads $t -i "$s" \
		-vf hwdownload,format=nv12 -fps_mode passthrough -f null - >> "$OUT/smoke.txt" 2>&1; echo "rc $?" >> "$OUT/smoke.txt"
	echo "-- threads $t, 600 pictures unpaced, left on the GPU" >> "$OUT/smoke.txt"
	cat "$s" "$s" | "$ff" -hide_banner -benchmark -hwaccel cuda -hwaccel_output_format cuda -threads $t -f h264 -i pipe:0 \
		-fps_mode passthrough -f null - >> "$OUT/smoke.txt" 2>&1; echo "rc $?" >> "$OUT/smoke.txt"
done
tr '\r' '\n' < "$OUT/smoke.txt" | grep -E '^(==|--|rc|bench:)|frame= *[0-9]+ .*Lsize|rror|ailed' | tail -40
}
timeout 450 "$w/nvdecbench" -file "$s" -streams "${STREAMS:-1,16,64,128}" -seconds 5 -unpaced 600 -all \
	-ffmpeg "$ff" -ffmpeg-threads "${THREADS:-auto,1}" -ffmpeg-stagger "${STAGGER:-0s}" > "$OUT/bench.txt" 2>&1
echo "bench rc $?" >> "$OUT/bench.txt"
cat "$OUT/bench.txt"
rm -rf "$w"
