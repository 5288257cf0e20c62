package vendorhttp_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// TestAGivenUpRequestNeverArrives: a request whose bytes are still queued in the
// client's kernel when the client gives up (the receiver's window is closed, as a cut
// network would hold them) never reaches the receiver with vendorhttp.Dial; with a
// graceful close, as http.DefaultTransport's, the kernel delivers it whole once the
// receiver reads again, after the client gave up.
func TestAGivenUpRequestNeverArrives(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("x"), 256<<10)
	graceful := (&net.Dialer{}).DialContext
	for _, c := range []struct {
		name  string
		dial  func(context.Context, string, string) (net.Conn, error)
		whole bool
	}{
		{"aborted", vendorhttp.Dial, false},
		{"graceful", graceful, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A receiver whose socket holds a few KiB: the rest waits at the client.
			lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
				if err != nil {
					return err
				}
				return serr
			}}
			ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = ln.Close() })
			accepted := make(chan net.Conn, 1)
			go func() {
				conn, err := ln.Accept()
				if err == nil {
					accepted <- conn
				}
			}()

			transport := http.DefaultTransport.(*http.Transport).Clone()
			transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := c.dial(ctx, network, addr)
				if err == nil {
					// Room for the whole request in the client's kernel.
					err = conn.(*net.TCPConn).SetWriteBuffer(1 << 20)
				}
				return conn, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/charge", bytes.NewReader(body))
			require.NoError(t, err)
			_, err = (&http.Client{Transport: transport}).Do(req)
			require.Error(t, err, "the receiver never answers: the client gives up")

			// The network heals: the receiver reads what reaches it.
			conn := <-accepted
			defer conn.Close()
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
			n, _ := io.Copy(io.Discard, conn)
			if c.whole {
				require.Greater(t, n, int64(len(body)), "a graceful close delivers the whole request late")
			} else {
				require.Less(t, n, int64(len(body)), "an aborted connection drops what it held")
			}
		})
	}
}

// TestTransportDialsWithAbort: Transport is http.DefaultTransport's clone with Dial,
// and AbortsOnClose tells it from http.DefaultTransport.
func TestTransportDialsWithAbort(t *testing.T) {
	t.Parallel()
	tr := vendorhttp.Transport()
	require.Equal(t, http.DefaultTransport.(*http.Transport).MaxIdleConns, tr.MaxIdleConns)
	aborts, err := vendorhttp.AbortsOnClose(t.Context(), tr)
	require.NoError(t, err)
	require.True(t, aborts)
	aborts, err = vendorhttp.AbortsOnClose(t.Context(), http.DefaultTransport.(*http.Transport))
	require.NoError(t, err)
	require.False(t, aborts)
}
