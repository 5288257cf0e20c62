package tenant_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// stallingProxy forwards TCP connections to target until stall is called; from then on
// it forwards nothing more, in either direction, and closes nothing, as a cut network
// does.
type stallingProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	stalled chan struct{}
	once    sync.Once
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallingProxy{ln: ln, stalled: make(chan struct{})}
	over := make(chan struct{})
	var conns []net.Conn
	t.Cleanup(func() {
		close(over)
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			conns = append(conns, in, out)
			p.mu.Unlock()
			go p.pipe(in, out, over)
			go p.pipe(out, in, over)
		}
	}()
	return p
}

// pipe copies from src to dst until the proxy stalls, then holds what it read.
func (p *stallingProxy) pipe(dst, src net.Conn, over chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.stalled:
			<-over
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallingProxy) stall() { p.once.Do(func() { close(p.stalled) }) }

// TestStalledListenerStopsTheTokenCache: a caching store remembers a token check for an
// hour while its process listens for token changes; then the listening connection
// stalls (a cut network: nothing forwarded, nothing closed) and another process revokes
// the token. The announcement never arrives, but the heartbeat on the listening
// connection does not come back either: within a few heartbeats the store is told
// listening stopped, empties its cache and asks Postgres, which refuses the token.
func TestStalledListenerStopsTheTokenCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	cfg := pool.Config().ConnConfig.Copy()
	proxy := newStallingProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	proxyAddr := proxy.ln.Addr().(*net.TCPAddr)
	cfg.Host, cfg.Port = "127.0.0.1", uint16(proxyAddr.Port)
	cfg.Fallbacks = nil

	cached := tenant.NewCachingStore(pool, time.Hour)
	l := pglisten.New(cfg, nil)
	l.SetHeartbeat(200 * time.Millisecond)
	l.Handle(tenant.AuthChannel, cached, "token checks ask Postgres")
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(lctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, cached.ListeningForTest, 10*time.Second, 10*time.Millisecond)

	_, token, err := cached.Create(ctx, "acme")
	require.NoError(t, err)
	_, err = cached.Authenticate(ctx, token)
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond) // heartbeats come back while the connection is well
	require.True(t, cached.ListeningForTest())

	proxy.stall()
	require.NoError(t, tenant.NewStore(pool).RevokeToken(ctx, token))
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := cached.Authenticate(ctx, token)
		return errors.Is(err, tenant.ErrUnauthorized)
	}, 5*time.Second, 10*time.Millisecond, "a token revoked while the listening connection stalls still works")
	require.Less(t, time.Since(start), 2*time.Second)
	// The refusal may come first (an earlier announcement, delivered late on a loaded
	// machine, emptied the cache): the heartbeat's verdict follows within two of them.
	require.Eventually(t, func() bool { return !cached.ListeningForTest() }, 2*time.Second, 10*time.Millisecond,
		"the store caches nothing until listening is healthy again")
}
