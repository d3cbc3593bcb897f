// Package h26xtest is what the tests of the video decoders (sensors/avcodec,
// sensors/nvdec, sensors/v4l2dec) and of the network camera (sensors/rtsp)
// share: the committed sample streams of sensors/h26x/testdata read as the
// depacketizer delivers them (Annex-B access units), the loop that decodes
// every one of them into host memory, and the check of an NV12 picture
// against a fake decoder's pattern. It is for tests only.
package h26xtest
