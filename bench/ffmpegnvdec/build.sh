#!/bin/sh
# Builds the minimal ffmpeg that nvdecbench -ffmpeg compares NVDEC against:
# FFmpeg 5.1 (Debian bookworm's source) with only what `ffmpeg -hwaccel cuda`
# needs to decode H.264/H.265 from a file, a pipe or RTSP into the null or
# framecrc muxer; nv-codec-headers from Debian's libffmpeg-nvenc-dev.
# libcuda and libnvcuvid are loaded at run time (ffnvcodec), so the binary
# needs only glibc.
#
#   build.sh SRC NVHEADERS OUT [JOBS]
#
# SRC: an unpacked ffmpeg source tree (apt-get source ffmpeg, or the
# ffmpeg_5.1.*.orig.tar.xz from bookworm's pool); NVHEADERS: a folder with
# include/ffnvcodec/*.h (dpkg-deb -x libffmpeg-nvenc-dev_*.deb x; x/usr);
# OUT: where bin/ffmpeg goes. Needs a C compiler and make; nasm if present
# (else the x86 assembly is left out: it is the CPU decoder's, unused when
# NVDEC decodes). Neither the source nor the binary is committed.
set -eu
src=$(cd "$1" && pwd); nvh=$(cd "$2" && pwd); mkdir -p "$3"; out=$(cd "$3" && pwd); jobs=${4:-$(nproc)}

# configure finds ffnvcodec only through pkg-config: a .pc for NVHEADERS.
mkdir -p "$out/pkgconfig"
cat > "$out/pkgconfig/ffnvcodec.pc" <<PC
prefix=$nvh
includedir=\${prefix}/include
Name: ffnvcodec
Description: FFmpeg version of Nvidia Codec SDK headers
Version: $(sed -n 's/^Version: *//p' "$nvh/share/pkgconfig/ffnvcodec.pc" 2>/dev/null || echo 11.1.5.2)
Cflags: -I\${includedir}
PC
pc=pkg-config
if ! command -v pkg-config >/dev/null; then
	# the GPU machine may have no pkg-config: answer for ffnvcodec only
	cat > "$out/pkgconfig/pkg-config" <<PK
#!/bin/sh
case "\$*" in
*--exists*ffnvcodec*|*--version*) exit 0 ;;
*--cflags*ffnvcodec*) echo "-I$nvh/include" ;;
*ffnvcodec*) echo ;;
*) exit 1 ;;
esac
PK
	chmod +x "$out/pkgconfig/pkg-config"; pc=$out/pkgconfig/pkg-config
fi
asm=; command -v nasm >/dev/null || asm=--disable-x86asm

mkdir -p "$out/build" && cd "$out/build"
PKG_CONFIG_PATH=$out/pkgconfig "$src/configure" --prefix="$out" --pkg-config="$pc" $asm \
	--disable-everything --disable-autodetect --disable-doc --disable-debug \
	--disable-ffplay --disable-ffprobe --enable-ffmpeg --disable-shared --enable-static \
	--enable-ffnvcodec --enable-cuda --enable-nvdec --enable-cuvid \
	--enable-decoder=h264,hevc,h264_cuvid,hevc_cuvid \
	--enable-hwaccel=h264_nvdec,hevc_nvdec \
	--enable-parser=h264,hevc \
	--enable-demuxer=h264,hevc,rtsp,sdp --enable-muxer=null,framecrc \
	--enable-encoder=wrapped_avframe \
	--enable-protocol=file,pipe,rtp,tcp,udp \
	--enable-filter=buffer,buffersink,null,format,scale,hwdownload,hwupload,trim,setpts,abuffer,abuffersink,anull,aformat,aresample,atrim \
	--enable-swscale --enable-swresample --enable-network \
	--extra-ldflags=-static-libgcc >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j"$jobs" >make.log 2>&1 || { tail -40 make.log; exit 1; }
make install >install.log 2>&1
"$out/bin/ffmpeg" -hide_banner -hwaccels
