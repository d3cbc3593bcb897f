// Package pixconv converts between packed RGB24 pixels and the frame
// formats of package sensors (YUYV, UYVY, NV12, GREY, RGB24, BGR24, and
// MJPEG for decoding).
//
// # Colour matrix
//
// YUV formats (YUYV, UYVY, NV12) use ITU-R BT.601 in limited ("studio")
// range, the V4L2 default for SDTV/webcam YUV: Y in [16, 235], Cb and Cr in
// [16, 240] centred on 128. The integer forms are
//
//	Y  = ((  66 R + 129 G +  25 B + 128) >> 8) + 16
//	Cb = (( -38 R -  74 G + 112 B + 128) >> 8) + 128
//	Cr = (( 112 R -  94 G -  18 B + 128) >> 8) + 128
//
// and back, with C = Y-16, D = Cb-128, E = Cr-128,
//
//	R = clamp((298 C         + 409 E + 128) >> 8)
//	G = clamp((298 C - 100 D - 208 E + 128) >> 8)
//	B = clamp((298 C + 516 D         + 128) >> 8)
//
// A round trip changes a channel by at most 3. Chroma is subsampled by
// averaging: horizontally pairs of pixels for 4:2:2 (YUYV, UYVY), 2×2
// blocks for 4:2:0 (NV12, whose interleaved CbCr plane follows the Y plane
// and uses the same stride).
//
// GREY is full-range luma with the BT.601 weights
// (Y = (77 R + 150 G + 29 B + 128) >> 8), which is what monochrome sensors
// deliver.
//
// Nothing here allocates except MJPEG decoding, which uses image/jpeg.
package pixconv
