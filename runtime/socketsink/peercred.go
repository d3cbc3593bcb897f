package socketsink

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PeerCred is a socket client's identity, taken by the kernel when it
// connected: uid and gid from SO_PEERCRED, supplementary groups from
// SO_PEERGROUPS (Linux 4.13; nil on older kernels). PID is for logs only
// (PIDs are recycled).
type PeerCred struct {
	PID      int32
	UID, GID uint32
	Groups   []uint32
}

func (p PeerCred) String() string {
	if len(p.Groups) == 0 {
		return fmt.Sprintf("pid=%d uid=%d gid=%d", p.PID, p.UID, p.GID)
	}
	return fmt.Sprintf("pid=%d uid=%d gid=%d groups=%v", p.PID, p.UID, p.GID, p.Groups)
}

// peerCred reads SO_PEERCRED and SO_PEERGROUPS from a Unix socket
// connection.
func peerCred(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var (
		uc     *unix.Ucred
		groups []uint32
		uerr   error
	)
	if err := raw.Control(func(fd uintptr) {
		if uc, uerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); uerr == nil {
			groups, uerr = peerGroups(int(fd))
		}
	}); err != nil {
		return PeerCred{}, err
	}
	if uerr != nil {
		return PeerCred{}, uerr
	}
	return PeerCred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid, Groups: groups}, nil
}

// peerGroups reads SO_PEERGROUPS: the peer's supplementary groups when it
// connected. The kernel answers ERANGE with the size it needs when the
// buffer is too small. A kernel without the option gives nil, nil.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 32)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case e == 0:
			return buf[:n/4], nil
		case e == unix.ERANGE && int(n/4) > len(buf):
			buf = make([]uint32, n/4)
		case errors.Is(e, unix.ENOPROTOOPT):
			return nil, nil
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", e)
		}
	}
}

// allowed applies the allowlists: with none set everyone who can open the
// socket file is allowed; otherwise the peer's uid, primary gid or one of
// its supplementary groups must be listed.
func allowed(p PeerCred, uids, gids []uint32) bool {
	if len(uids) == 0 && len(gids) == 0 {
		return true
	}
	if slices.Contains(uids, p.UID) || slices.Contains(gids, p.GID) {
		return true
	}
	for _, g := range p.Groups {
		if slices.Contains(gids, g) {
			return true
		}
	}
	return false
}
