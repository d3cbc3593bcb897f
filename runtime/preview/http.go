package preview

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The page: plain HTML, CSS and JavaScript, compiled in, nothing fetched
// from anywhere else.
//
//go:embed page
var page embed.FS

// writeTimeout bounds each write to a viewer: one that takes no picture
// for this long is cut off.
var writeTimeout = 10 * time.Second

// Boundary separates the pictures of a .mjpeg stream.
const Boundary = "edgedpicture"

// Register adds the preview's routes to mux: GET / (the page, and its
// preview.css and preview.js), /status.json, /preview/<pipeline>.jpg and
// .mjpeg (a pipeline's only camera) and /preview/<pipeline>/<source>.jpg
// and .mjpeg. HEAD is answered as GET without a body.
func (h *Hub) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", h.asset("page/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /preview.css", h.asset("page/preview.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /preview.js", h.asset("page/preview.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		if !h.off(w) {
			w.WriteHeader(http.StatusNoContent) // no icon: a browser asks for one
		}
	})
	mux.HandleFunc("GET /status.json", h.serveStatus)
	mux.HandleFunc("GET /preview/{file}", h.servePicture)
	mux.HandleFunc("GET /preview/{pipeline}/{file}", h.servePicture)
}

// headers are every preview response's: nothing cached, nothing sniffed,
// nothing framed, only this origin's scripts.
func headers(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob:; frame-ancestors 'none'")
}

// off answers while the preview is off: 404, saying how to turn it on.
func (h *Hub) off(w http.ResponseWriter) bool {
	if h.settings().Enabled {
		return false
	}
	http.Error(w, "the preview is off: set [daemon] preview = true (and SIGHUP)\n", http.StatusNotFound)
	return true
}

func (h *Hub) asset(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.off(w) {
			return
		}
		b, err := page.ReadFile(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		headers(w)
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}
}

func (h *Hub) serveStatus(w http.ResponseWriter, r *http.Request) {
	if h.off(w) {
		return
	}
	b, err := json.MarshalIndent(h.status(), "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	headers(w)
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// servePicture serves /preview/<pipeline>[/<source>].jpg or .mjpeg to a
// viewer, at most preview_clients of them per picture at a time.
func (h *Hub) servePicture(w http.ResponseWriter, r *http.Request) {
	if h.off(w) {
		return
	}
	pipeline, file := r.PathValue("pipeline"), r.PathValue("file")
	base, ext := file, ""
	for _, e := range []string{".jpg", ".mjpeg"} {
		if b, ok := strings.CutSuffix(file, e); ok {
			base, ext = b, e
		}
	}
	if ext == "" || base == "" {
		http.Error(w, "want /preview/<pipeline>.jpg, .mjpeg, or /preview/<pipeline>/<source>.jpg, .mjpeg\n", http.StatusNotFound)
		return
	}
	source := base
	if pipeline == "" {
		pipeline, source = base, ""
	}
	t, err := h.lookup(pipeline, source)
	if err != nil {
		http.Error(w, err.Error()+"\n", http.StatusNotFound)
		return
	}
	limit := h.settings().Clients
	if !t.acquire(limit) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("%s: %d viewers watch already (preview_clients = %d)\n", PicturePath(t.key, ext), limit, limit),
			http.StatusServiceUnavailable)
		return
	}
	defer t.leave()
	headers(w)
	if ext == ".jpg" {
		h.serveJPEG(w, r, t)
	} else {
		h.serveStream(w, r, t)
	}
}

// serveJPEG answers with the tap's latest picture, or the first one after
// ?after=N (the X-Edged-Picture of one already seen), waiting for it up to
// waitTimeout.
func (h *Hub) serveJPEG(w http.ResponseWriter, r *http.Request, t *Tap) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	p, err := t.next(r.Context(), after)
	if err != nil {
		noPicture(w, t, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "image/jpeg")
	hd.Set("Content-Length", strconv.Itoa(len(p.JPEG)))
	pictureHeaders(textproto.MIMEHeader(hd), p)
	if r.Method == http.MethodHead {
		return
	}
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	w.Write(p.JPEG)
}

// pictureHeaders say which picture and frame a response carries.
func pictureHeaders(hd textproto.MIMEHeader, p *Picture) {
	hd.Set("X-Edged-Picture", strconv.FormatUint(p.N, 10))
	hd.Set("X-Edged-Frame-Seq", strconv.FormatUint(p.Seq, 10))
	hd.Set("X-Edged-Capture-Ns", strconv.FormatInt(p.TCapture, 10))
	if p.Engine.Name != "" {
		hd.Set("X-Edged-Engine", fmt.Sprintf("%s %d %s", p.Engine.Name, p.Engine.Generation, p.Engine.SHA256))
	}
}

// noPicture answers a request no picture came for.
func noPicture(w http.ResponseWriter, t *Tap, err error) {
	switch {
	case errors.Is(err, ErrClosed):
		http.Error(w, fmt.Sprintf("%s/%s is gone (edged stops, or the pipeline left the configuration)\n", t.key.Pipeline, t.key.Source), http.StatusNotFound)
	case errors.Is(err, errNoPicture):
		w.Header().Set("Retry-After", "1")
		msg := fmt.Sprintf("no picture of %s/%s in %s: its pipeline processed no frame (see /status.json)", t.key.Pipeline, t.key.Source, waitTimeout)
		if n, why := t.Skipped(); n > 0 {
			msg += fmt.Sprintf("; %d frames could not be shown: %s", n, why)
		}
		http.Error(w, msg+"\n", http.StatusServiceUnavailable)
	}
	// A viewer that went away needs no answer.
}

// serveStream sends every picture of the tap, as it comes, as one part of
// a multipart/x-mixed-replace response, until the viewer leaves, the tap
// closes or the preview is turned off. Each part is followed at once by
// the boundary, so a client knows the picture is whole when it arrives,
// not when the next one does. A viewer slower than the pictures gets the
// newest one when it is ready for it; one that takes nothing for
// writeTimeout is cut off.
func (h *Hub) serveStream(w http.ResponseWriter, r *http.Request, t *Tap) {
	w.Header().Set("Content-Type", "multipart/x-mixed-replace; boundary="+Boundary)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	// The headers and the first boundary go out now: a client learns at
	// once that it is in, before the first picture (which waits for a
	// frame).
	w.WriteHeader(http.StatusOK)
	rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := io.WriteString(w, "--"+Boundary+"\r\n"); err != nil || rc.Flush() != nil {
		return
	}
	var last uint64
	var head bytes.Buffer
	for h.settings().Enabled {
		p, err := t.next(r.Context(), last)
		if errors.Is(err, errNoPicture) {
			continue // a pipeline waiting for its camera: keep waiting
		}
		if err != nil {
			return
		}
		last = p.N
		hd := textproto.MIMEHeader{}
		hd.Set("Content-Type", "image/jpeg")
		hd.Set("Content-Length", strconv.Itoa(len(p.JPEG)))
		pictureHeaders(hd, p)
		head.Reset()
		writePartHeader(&head, hd)
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err = w.Write(head.Bytes())
		if err == nil {
			_, err = w.Write(p.JPEG)
		}
		if err == nil {
			_, err = io.WriteString(w, "\r\n--"+Boundary+"\r\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// writePartHeader writes a part's header lines, sorted, and the blank line
// after them.
func writePartHeader(b *bytes.Buffer, hd textproto.MIMEHeader) {
	keys := make([]string, 0, len(hd))
	for k := range hd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range hd[k] {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
}
