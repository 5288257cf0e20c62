package vendorhttp

import (
	"context"
	"net"
	"net/http"

	"golang.org/x/sys/unix"
)

// AbortsOnClose reports whether the connections t dials are aborted when closed
// (SO_LINGER 0), by dialing a loopback listener of its own: it lets a vendor adapter's
// test check that its default transport is this package's. Linux only.
func AbortsOnClose(ctx context.Context, t *http.Transport) (bool, error) {
	if t.DialContext == nil {
		return false, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	defer ln.Close()
	c, err := t.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return false, err
	}
	defer c.Close()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false, err
	}
	var (
		l    *unix.Linger
		lerr error
	)
	if err := raw.Control(func(fd uintptr) { l, lerr = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER) }); err != nil {
		return false, err
	}
	if lerr != nil {
		return false, lerr
	}
	return l.Onoff == 1 && l.Linger == 0, nil
}
