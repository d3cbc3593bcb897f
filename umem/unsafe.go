package umem

import "unsafe"

// ptrOf converts a pointer to an unsafe.Pointer in one place.
func ptrOf[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }
