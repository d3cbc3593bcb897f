// Package preview shows what the cameras see: each pipeline's latest frame
// with its results drawn on it (package overlay), as JPEG pictures and
// MJPEG streams, and a page listing every pipeline with its picture and
// health, all on the daemon's HTTP listener.
//
// # The frame tap
//
// A pipeline holds a [Tap] per camera, from the [Hub], keyed by pipeline
// and source (a batched pipeline has a picture per camera). While nobody
// watches, the pipeline's cost per frame is one atomic load ([Tap.Due]):
// no copy, no encoding, no allocation. While somebody does, one frame per
// 1/preview_fps is copied where the pipeline reads it on the host anyway,
// before it releases the frame's slot ([Tap.Copy]: only every step-th row,
// for a picture at most preview_width wide), and its results after they
// are published ([Tap.Finish]). The tap's own goroutine then converts,
// draws and encodes (libjpeg-turbo, else image/jpeg, package jpeg); the
// pipeline never waits for it, nor for any viewer: a frame that comes
// while the previous copy is still being drawn is simply not copied.
//
// # Routes
//
// [Hub.Register] serves, read-only:
//
//	GET /                                 the page (plain HTML, CSS and JavaScript, compiled in)
//	GET /status.json                      what the page shows: pipelines, engines, cameras, board
//	GET /preview/<pipeline>.jpg           the latest picture of a pipeline with one camera
//	GET /preview/<pipeline>.mjpeg         the same as a multipart/x-mixed-replace stream
//	GET /preview/<pipeline>/<source>.jpg  the picture of one camera of a pipeline (and .mjpeg)
//
// A .jpg request waits up to 3 s for a picture (?after=N: the first one
// after the picture numbered N, as X-Edged-Picture says). At most
// preview_clients viewers watch one picture at a time; the next get 503.
// A viewer slower than the pictures gets the newest one when it is ready
// for it, and one that takes nothing for 10 s is cut off.
package preview
