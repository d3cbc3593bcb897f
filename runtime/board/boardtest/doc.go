// Package boardtest lays out fake sysfs, procfs and root trees for tests of
// code that reads the board (runtime/board, the daemon, the binary): a
// Jetson AGX Orin with JetPack 5 (L4T r35), a Jetson Orin Nano with JetPack
// 6 (L4T r36), a Jetson AGX Xavier with JetPack 5, and an x86 host. The
// trees are in testdata/, one folder per board with sys/, proc/ and root/;
// Copy puts one in a temporary folder the test may change (a zone heating
// up, a file that disappears or cannot be read).
//
// The layout follows the paths docs/OPERATIONS.md lists with their sources
// (NVIDIA's Jetson Linux Developer Guide, the kernel's ABI documents,
// nvpmodel's files); the numbers are examples, not read from a board.
// Quirks a tree cannot hold are left to the tests: an Orin Nano's
// cv0-thermal to cv2-thermal answer EAGAIN on a board, and have no temp
// file here.
package boardtest
