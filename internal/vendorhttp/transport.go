// Package vendorhttp makes the HTTP transport oncebox calls vendors with.
//
// A request a vendor never received may still be sent by the kernel after oncebox gave
// up on it: its bytes wait in the socket's send queue while the network is cut (a
// partition, a dead link) and go out once it heals, seconds after the worker timed out,
// recorded the attempt as unanswered and, possibly, resent the op or let the reconciler
// find nothing. The late copy then acts after a refusal was recorded, or beside the
// resend. A closed socket keeps sending what it holds (a graceful close); this
// transport's sockets are aborted instead (SO_LINGER 0): closing one drops what it
// still holds and resets the connection, so a request the worker gave up on is either
// at the vendor already or never arrives.
package vendorhttp

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Transport returns a clone of http.DefaultTransport whose TCP connections are aborted
// when they are closed (SO_LINGER 0), as the package doc says. net/http closes the
// connection of a request whose context ended before its answer came, so a timed-out
// request's unsent bytes are dropped with it; a connection closed after its answer was
// read loses nothing by it.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = Dial
	return t
}

// dialer is http.DefaultTransport's dialer.
var dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// Dial dials as http.DefaultTransport does, then sets SO_LINGER 0 on a TCP connection.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialAborting(ctx, dialer, network, addr)
}

// dialAborting dials with d, then sets SO_LINGER 0 on a TCP connection.
func dialAborting(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}
