// Package camkeys holds the configuration keys every camera that makes its
// own frames has (v4l2, synthetic, replay: the frame size, pixel format,
// rate and buffers), their defaults and their checks, which those kinds'
// packages embed in their own keys (confkeys).
package camkeys
