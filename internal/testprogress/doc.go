// Command testprogress reads `go test -json` on stdin and prints what
// `go test` prints without -v (one line per package: ok, FAIL, no test
// files), plus, for every test that failed, everything it wrote, and the
// output of a package that failed outside a test (a build error, a panic,
// a timeout). While packages run and nothing else was printed for 20 s, it
// says which are running and their longest-running tests, so `make test`
// is never silent for long. It exits 1 when a package failed or the input
// ended before every package had finished.
//
//	go test -json ./... | go run ./internal/testprogress
package main
