// Package postprocess turns engine output tensors into result outputs:
// raw values (capped), top-k classes, or object detections decoded from
// YOLOv8-style tensors with non-maximum suppression. Each Processor owns
// the slices it fills, so steady-state frames allocate nothing.
package postprocess
