package stream

import (
	"fmt"
	"net"
	"slices"

	"golang.org/x/sys/unix"
)

// PeerCred is a socket client's identity from SO_PEERCRED, taken when it
// connected. PID is for logs only (PIDs are recycled); GID is the primary
// group only.
type PeerCred struct {
	PID      int32
	UID, GID uint32
}

func (p PeerCred) String() string { return fmt.Sprintf("pid=%d uid=%d gid=%d", p.PID, p.UID, p.GID) }

// peerCred reads SO_PEERCRED from a Unix socket connection.
func peerCred(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var (
		uc   *unix.Ucred
		uerr error
	)
	if err := raw.Control(func(fd uintptr) {
		uc, uerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, err
	}
	if uerr != nil {
		return PeerCred{}, uerr
	}
	return PeerCred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}

// allowed applies the allowlists: with none set everyone who can open the
// socket file is allowed; otherwise the peer's uid or primary gid must be
// listed.
func allowed(p PeerCred, uids, gids []uint32) bool {
	if len(uids) == 0 && len(gids) == 0 {
		return true
	}
	return slices.Contains(uids, p.UID) || slices.Contains(gids, p.GID)
}
