// Package h26x is the H.264 and H.265 bitstream layer of network cameras:
// it turns RTP payloads (RFC 6184 single NAL units, STAP-A and FU-A; RFC
// 7798 single NAL units, aggregation and fragmentation units) into Annex-B
// access units in buffers it reuses, so a steady stream allocates nothing,
// and it reads what a source must know before decoding: the sequence
// parameter set's picture size (with its cropping), profile, level, bit
// depth and frame rate, and whether an access unit is a random access point
// (an IDR picture, or an H.265 IRAP picture).
//
// Loss is the depacketizer's business, not the decoder's: libavcodec does
// not flag pictures decoded from a missing reference, so after a sequence
// gap, a fragment without its start, a payload it cannot read or a full
// buffer ring, every access unit is dropped until the next random access
// point, and each drop is counted by its reason. Nothing here allocates per
// packet or per access unit once the buffers have grown to the stream's
// largest access unit.
package h26x
