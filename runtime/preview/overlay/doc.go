// Package overlay draws what a result says onto its frame: a box with its
// label and score for each detection, its keypoints (with COCO's skeleton
// for 17-point poses), the top classes of a classifier, and a caption (the
// capture time and frame_seq) in a corner.
//
// Text is drawn in a bitmap font compiled into the binary
// (golang.org/x/image's basicfont 7x13, ASCII; other characters show as a
// box), scaled by whole pixels for large pictures: no font file is read.
// Drawing works on *image.RGBA in place.
package overlay
