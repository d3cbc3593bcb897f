package tensorrt

import "github.com/edged-dev/edged/trt/plan"

// Sniff implements trt.Sniffer with plan.Sniff: a file that is not a
// TensorRT plan (bare or Ultralytics-wrapped) is refused from its first
// bytes, before it is read whole.
func (*Backend) Sniff(head []byte, size int64) error { return plan.Sniff(head, size) }
