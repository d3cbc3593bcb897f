//go:build !cgo || !linux

package umem

func gettid() int       { return 0 }
func nvrtcPath() string { return "" }
