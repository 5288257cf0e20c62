package latevendor

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"time"
)

// Late is what DeliversAfterCancel saw.
type Late struct {
	// Proto is the protocol the vendor answered the first request in ("HTTP/2.0",
	// "HTTP/1.1").
	Proto string
	// Delivered is true when the vendor read the whole request after the client had
	// given up on it: a vendor acting on whole requests acts on it late.
	Delivered bool
}

// lateBodyBytes is the size of DeliversAfterCancel's request: more than the stalled
// vendor's socket holds, so that most of it waits in the client's kernel.
const lateBodyBytes = 64 << 10

// DeliversAfterCancel reports whether a request sent with a clone of t, given up on
// while the network held it back, still reaches the vendor whole once the network
// heals. It runs a TLS vendor of its own that speaks HTTP/2 and HTTP/1.1: a first
// request opens the connection (and, over HTTP/2, the connection every later request
// shares); then the vendor stops reading its sockets, whose receive buffers are small,
// so that a POST stays queued in the client's kernel; the client gives up on it after
// 300 ms; the vendor reads again, and its handler records whether the POST's whole body
// came. Over HTTP/2 it does (the cancel resets the stream, the connection stays open);
// over HTTP/1.1 with vendorhttp.Transport the cancel aborts the connection, and it never does. It
// lets a vendor adapter's test check its default transport. Linux only.
func DeliversAfterCancel(ctx context.Context, t *http.Transport) (Late, error) {
	v, err := startStallingVendor()
	if err != nil {
		return Late{}, err
	}
	defer v.srv.Close()
	defer v.stall(false)
	client := &http.Client{Transport: v.trust(t)}
	defer client.CloseIdleConnections()

	warm, err := http.NewRequestWithContext(ctx, http.MethodGet, v.srv.URL+"/warm", nil)
	if err != nil {
		return Late{}, err
	}
	resp, err := client.Do(warm)
	if err != nil {
		return Late{}, fmt.Errorf("the first request: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	out := Late{Proto: resp.Proto}

	v.stall(true)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, v.srv.URL+"/send", bytes.NewReader(bytes.Repeat([]byte("m"), lateBodyBytes)))
	if err != nil {
		cancel()
		return Late{}, err
	}
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		cancel()
		return Late{}, errors.New("the stalled vendor answered the request")
	}
	cancel()
	v.stall(false)
	select {
	case <-v.whole:
		out.Delivered = true
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return out, ctx.Err()
	}
	return out, nil
}

// stallingVendor is DeliversAfterCancel's vendor: its sockets stop being read while
// stalled; whole receives a value when a POST's whole body was read.
type stallingVendor struct {
	srv   *httptest.Server
	whole chan struct{}

	mu      sync.Mutex
	stalled bool
	resumed *sync.Cond
}

func startStallingVendor() (*stallingVendor, error) {
	v := &stallingVendor{whole: make(chan struct{}, 1)}
	v.resumed = sync.NewCond(&v.mu)
	// Receive buffers of a few KiB: what the vendor does not read waits at the client.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	v.srv = httptest.NewUnstartedServer(http.HandlerFunc(v.serve))
	_ = v.srv.Listener.Close()
	v.srv.Listener = &stallListener{Listener: ln, v: v}
	v.srv.EnableHTTP2 = true
	// Both, as a vendor's server offers them: the client picks.
	v.srv.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	v.srv.StartTLS()
	return v, nil
}

func (v *stallingVendor) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return
	}
	n, _ := io.Copy(io.Discard, r.Body)
	if n == lateBodyBytes {
		select {
		case v.whole <- struct{}{}:
		default:
		}
	}
}

// trust returns a clone of t that trusts the vendor's certificate and whose sockets
// can queue the whole request in the client's kernel; t's dialer is kept.
func (v *stallingVendor) trust(t *http.Transport) *http.Transport {
	c := t.Clone()
	cfg := &tls.Config{}
	if c.TLSClientConfig != nil {
		cfg = c.TLSClientConfig.Clone()
	}
	cfg.RootCAs = v.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c.TLSClientConfig = cfg
	dial := c.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok && err == nil {
			err = tc.SetWriteBuffer(1 << 20)
		}
		return conn, err
	}
	return c
}

func (v *stallingVendor) stall(on bool) {
	v.mu.Lock()
	v.stalled = on
	v.mu.Unlock()
	v.resumed.Broadcast()
}

// stallListener hands out connections whose reads wait while the vendor is stalled.
type stallListener struct {
	net.Listener
	v *stallingVendor
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, v: l.v}, nil
}

type stallConn struct {
	net.Conn
	v *stallingVendor
}

func (c *stallConn) Read(b []byte) (int, error) {
	c.v.mu.Lock()
	for c.v.stalled {
		c.v.resumed.Wait()
	}
	c.v.mu.Unlock()
	return c.Conn.Read(b)
}
