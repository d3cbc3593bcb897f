//go:build ignore

// Input to cgo -godefs: the V4L2 kernel ABI as Go types. Regenerate with
//
//	cd sensors/v4l2
//	GOARCH=amd64 go tool cgo -godefs types_v4l2.go | gofmt > zv4l2_linux_amd64.go
//	GOARCH=arm64 CC=aarch64-linux-gnu-gcc go tool cgo -godefs -- -I/usr/aarch64-linux-gnu/include types_v4l2.go | gofmt > zv4l2_linux_arm64.go
//
// (make generate does this). Nothing here is compiled into edged: the
// generated files are plain Go, so the package needs no cgo.

package v4l2

/*
#include <sys/time.h>
#include <linux/videodev2.h>
*/
import "C"

type capability C.struct_v4l2_capability

type fmtDesc C.struct_v4l2_fmtdesc

type frmSizeEnum C.struct_v4l2_frmsizeenum

type frmSizeDiscrete C.struct_v4l2_frmsize_discrete

type frmSizeStepwise C.struct_v4l2_frmsize_stepwise

type frmIvalEnum C.struct_v4l2_frmivalenum

type fract C.struct_v4l2_fract

type frmIvalStepwise C.struct_v4l2_frmival_stepwise

type format C.struct_v4l2_format

type pixFormat C.struct_v4l2_pix_format

type streamParm C.struct_v4l2_streamparm

type captureParm C.struct_v4l2_captureparm

type requestBuffers C.struct_v4l2_requestbuffers

type buffer C.struct_v4l2_buffer

type timeval C.struct_timeval

type timecode C.struct_v4l2_timecode

const (
	sizeofFormat     = C.sizeof_struct_v4l2_format
	sizeofBuffer     = C.sizeof_struct_v4l2_buffer
	sizeofStreamParm = C.sizeof_struct_v4l2_streamparm
)

// ioctl requests.
const (
	vidiocQuerycap           = C.VIDIOC_QUERYCAP
	vidiocEnumFmt            = C.VIDIOC_ENUM_FMT
	vidiocEnumFramesizes     = C.VIDIOC_ENUM_FRAMESIZES
	vidiocEnumFrameintervals = C.VIDIOC_ENUM_FRAMEINTERVALS
	vidiocGFmt               = C.VIDIOC_G_FMT
	vidiocSFmt               = C.VIDIOC_S_FMT
	vidiocGParm              = C.VIDIOC_G_PARM
	vidiocSParm              = C.VIDIOC_S_PARM
	vidiocReqbufs            = C.VIDIOC_REQBUFS
	vidiocQuerybuf           = C.VIDIOC_QUERYBUF
	vidiocQbuf               = C.VIDIOC_QBUF
	vidiocDqbuf              = C.VIDIOC_DQBUF
	vidiocStreamon           = C.VIDIOC_STREAMON
	vidiocStreamoff          = C.VIDIOC_STREAMOFF
)

// Constants of the ABI.
const (
	bufTypeVideoCapture = C.V4L2_BUF_TYPE_VIDEO_CAPTURE
	memoryMmap          = C.V4L2_MEMORY_MMAP
	memoryUserptr       = C.V4L2_MEMORY_USERPTR
	fieldAny            = C.V4L2_FIELD_ANY
	fieldNone           = C.V4L2_FIELD_NONE

	capVideoCapture = C.V4L2_CAP_VIDEO_CAPTURE
	capStreaming    = C.V4L2_CAP_STREAMING
	capDeviceCaps   = C.V4L2_CAP_DEVICE_CAPS
	capTimePerFrame = C.V4L2_CAP_TIMEPERFRAME

	bufCapSupportsUserptr = C.V4L2_BUF_CAP_SUPPORTS_USERPTR

	bufFlagMapped             = C.V4L2_BUF_FLAG_MAPPED
	bufFlagQueued             = C.V4L2_BUF_FLAG_QUEUED
	bufFlagDone               = C.V4L2_BUF_FLAG_DONE
	bufFlagError              = C.V4L2_BUF_FLAG_ERROR
	bufFlagTimestampMask      = C.V4L2_BUF_FLAG_TIMESTAMP_MASK
	bufFlagTimestampUnknown   = C.V4L2_BUF_FLAG_TIMESTAMP_UNKNOWN
	bufFlagTimestampMonotonic = C.V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC
	bufFlagTimestampCopy      = C.V4L2_BUF_FLAG_TIMESTAMP_COPY

	fmtFlagCompressed = C.V4L2_FMT_FLAG_COMPRESSED

	frmsizeTypeDiscrete   = C.V4L2_FRMSIZE_TYPE_DISCRETE
	frmsizeTypeContinuous = C.V4L2_FRMSIZE_TYPE_CONTINUOUS
	frmsizeTypeStepwise   = C.V4L2_FRMSIZE_TYPE_STEPWISE
	frmivalTypeDiscrete   = C.V4L2_FRMIVAL_TYPE_DISCRETE
	frmivalTypeContinuous = C.V4L2_FRMIVAL_TYPE_CONTINUOUS
	frmivalTypeStepwise   = C.V4L2_FRMIVAL_TYPE_STEPWISE
)
