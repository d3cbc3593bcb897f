// Package sensors defines what the daemon reads from the world: camera
// frames written into leased memory slots, and timestamped samples from
// serial sensors (IMU, GPS, ...). Implementations live in sub-packages
// (synthetic, replay, v4l2, rtsp for network cameras, serialsrc), the
// decoders they use in others (jpeg, avcodec, and h26x for network
// video's bitstream); sensorstest holds fakes.
//
// Every timestamp is CLOCK_MONOTONIC in nanoseconds, so frames and samples
// from different devices can be matched and wall-clock steps change nothing.
//
// Sources do not allocate frame memory themselves: they lease slots from a
// [SlotPool] supplied by the caller (in the daemon, a umem.Pool whose slots
// the GPU can read), which is what lets a camera's DMA write the very buffer
// an engine reads.
package sensors
