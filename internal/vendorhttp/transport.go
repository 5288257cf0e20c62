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
//
// That holds for HTTP/1.1 only. Over HTTP/2 many requests share a connection, and
// giving up on one cancels its stream (RST_STREAM) without closing the connection: the
// bytes of the request still queued go out when the link heals, followed by the reset,
// and a vendor that acts on a whole request acts on it after the worker gave up. For a
// vendor with native idempotency keys (Stripe) the late copy is the key's first use or
// its replay; for one without (SendGrid, webhooks and catalog targets), it is a second
// side effect once a lookup found nothing. HTTP1Transport is the transport of those:
// it never negotiates HTTP/2 (docs/vendors.md, "HTTP/2").
package vendorhttp

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"slices"
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

// HTTP1Transport returns Transport limited to HTTP/1.1: it offers no "h2" in TLS's
// ALPN, so a vendor that speaks HTTP/2 answers over HTTP/1.1, each request on a
// connection of its own while it is in flight, and a request given up on closes (and
// aborts) its connection. For vendors without native idempotency keys, as the package
// doc says.
func HTTP1Transport() *http.Transport {
	t := Transport()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	t.Protocols = p
	// The clone may come configured for HTTP/2 already (cloning configures the
	// original): an empty TLSNextProto and no "h2" in ALPN, or a vendor picking h2
	// would be spoken to in HTTP/1.1.
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if t.TLSClientConfig != nil {
		t.TLSClientConfig.NextProtos = slices.DeleteFunc(slices.Clone(t.TLSClientConfig.NextProtos), func(p string) bool { return p == "h2" })
	}
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
