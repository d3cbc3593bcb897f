// Package mjpeg is what the camera sources (v4l2, replay, synthetic) share
// to deliver MJPEG as decoded RGB24 frames: one [jpeg.Decoder] per source,
// the decode scale chosen from the engine input the runtime announces with
// SetDecodeTarget, and the frame format that results (scaled size, with
// [sensors.Format.Downscale] so results map back to the camera's pixels).
package mjpeg
