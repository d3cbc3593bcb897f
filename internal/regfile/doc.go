// Package regfile reads the files a configuration or a command line names
// (the configuration itself, model files, password and TLS files, replay
// recordings) so that no path can hang or exhaust the daemon: the path
// must lead to a regular file, it is opened without blocking (O_NONBLOCK,
// so a FIFO or a device returns at once instead of waiting for a writer),
// checked again on the open descriptor (fstat: a regular file, within the
// caller's size limit), and read through that limit, so a file that grows
// while it is read is refused too. Every error is an *fs.PathError naming
// the file.
package regfile
