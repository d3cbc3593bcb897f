package v4l2dec

import "encoding/binary"

// The V4L2 memory-to-memory ABI the decoder speaks (linux/videodev2.h and
// NVIDIA's v4l2_nv_extensions.h), laid out by offsets: the structures are
// the same on arm64 (Jetson) and amd64 (these tests). Every ioctl argument
// is a byte array of the structure's size; a pointer inside one (a
// buffer's planes, the controls of S_EXT_CTRLS) is stored as an address,
// pointing into the same Go object, so cgo's pointer check sees no Go
// pointer in it.

// ioctl request numbers: _IOWR('V', nr, size) and friends.
func iowr(nr, size uint) uint { return 3<<30 | size<<16 | 'V'<<8 | nr }
func iow(nr, size uint) uint  { return 1<<30 | size<<16 | 'V'<<8 | nr }
func ior(nr, size uint) uint  { return 2<<30 | size<<16 | 'V'<<8 | nr }

const (
	formatSize   = 208 // struct v4l2_format
	reqbufsSize  = 20  // struct v4l2_requestbuffers
	bufferSize   = 88  // struct v4l2_buffer
	planeSize    = 64  // struct v4l2_plane
	expbufSize   = 64  // struct v4l2_exportbuffer
	subSize      = 32  // struct v4l2_event_subscription
	eventSize    = 136 // struct v4l2_event
	cropSize     = 20  // struct v4l2_crop
	controlSize  = 8   // struct v4l2_control
	extCtrlsSize = 32  // struct v4l2_ext_controls
	extCtrlSize  = 20  // struct v4l2_ext_control (packed)
	decCmdSize   = 72  // struct v4l2_decoder_cmd
)

var (
	vidiocGFmt           = iowr(4, formatSize)
	vidiocSFmt           = iowr(5, formatSize)
	vidiocReqbufs        = iowr(8, reqbufsSize)
	vidiocQuerybuf       = iowr(9, bufferSize)
	vidiocQbuf           = iowr(15, bufferSize)
	vidiocExpbuf         = iowr(16, expbufSize)
	vidiocDqbuf          = iowr(17, bufferSize)
	vidiocStreamon       = iow(18, 4)
	vidiocStreamoff      = iow(19, 4)
	vidiocGCtrl          = iowr(27, controlSize)
	vidiocGCrop          = iowr(59, cropSize)
	vidiocSExtCtrls      = iowr(72, extCtrlsSize)
	vidiocDqevent        = ior(89, eventSize)
	vidiocSubscribeEvent = iow(90, subSize)
	vidiocDecoderCmd     = iowr(96, decCmdSize)
)

const (
	bufTypeCapture = 9  // V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE: decoded pictures
	bufTypeOutput  = 10 // V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE: the bitstream

	memoryMMAP = 1

	bufFlagError         = 0x40
	bufFlagLast          = 0x100000
	bufFlagTimestampCopy = 0x4000

	eventEOS              = 2
	eventResolutionChange = 5 // V4L2_EVENT_RESOLUTION_CHANGE (NVIDIA's)

	cidMinBuffersForCapture = 0x00980900 + 39 // V4L2_CID_MIN_BUFFERS_FOR_CAPTURE
	ctrlClassMPEG           = 0x00990000
	cidMPEGBase             = 0x00990900
	// cidDisableCompleteFrameInput: 1 says the bitstream buffers are not
	// whole frames; edged queues one whole access unit per buffer, so it
	// sets 0.
	cidDisableCompleteFrameInput = cidMPEGBase + 515
	cidErrorReporting            = cidMPEGBase + 517

	decCmdStop = 1 // V4L2_DEC_CMD_STOP

	outputBuffers  = 4
	captureExtra   = 2 // capture buffers beyond the decoder's minimum
	outputMaxBytes = 4 << 20
)

func fourcc(a, b, c, d byte) uint32 {
	return uint32(a) | uint32(b)<<8 | uint32(c)<<16 | uint32(d)<<24
}

var (
	pixH264  = fourcc('H', '2', '6', '4')
	pixH265  = fourcc('H', '2', '6', '5') // NVIDIA's V4L2_PIX_FMT_H265
	pixNV12M = fourcc('N', 'M', '1', '2')
)

// Offsets.
const (
	// v4l2_format: type, then (at 8) v4l2_pix_format_mplane (packed):
	// width, height, pixelformat, field, colorspace, plane_fmt[8] of
	// {sizeimage, bytesperline, reserved[6] u16}, num_planes.
	fmtType, fmtWidth, fmtHeight, fmtPixel = 0, 8, 12, 16
	fmtPlane0Size, fmtPlane0Line           = 28, 32
	fmtPlaneStride                         = 20
	fmtNumPlanes                           = 188
	// v4l2_requestbuffers
	rbCount, rbType, rbMemory = 0, 4, 8
	// v4l2_buffer
	bufIndex, bufType, bufBytesUsed, bufFlags, bufField = 0, 4, 8, 12, 16
	bufTimeSec, bufTimeUsec, bufMemory, bufPlanes       = 24, 32, 60, 64
	bufLength                                           = 72
	// v4l2_plane
	plBytesUsed, plLength, plMemOffset, plDataOffset = 0, 4, 8, 16
	// v4l2_exportbuffer
	expType, expIndex, expPlane, expFlags, expFd = 0, 4, 8, 12, 16
	// v4l2_event_subscription, v4l2_event
	subType, evType = 0, 0
	// v4l2_crop: type, then v4l2_rect left, top, width, height
	cropType, cropLeft, cropTop, cropWidth, cropHeight = 0, 4, 8, 12, 16
	// v4l2_control
	ctrlID, ctrlValue = 0, 4
	// v4l2_ext_controls: which, count, error_idx, request_fd, reserved,
	// controls (pointer at 24); v4l2_ext_control: id, size, reserved, value
	ecClass, ecCount, ecControls = 0, 4, 24
	ecID, ecValue                = 0, 12
)

func get32(b []byte, off int) uint32    { return binary.LittleEndian.Uint32(b[off:]) }
func set32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func get64(b []byte, off int) uint64    { return binary.LittleEndian.Uint64(b[off:]) }
func set64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
