package vendorhttp_test

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// TestEgressRefusesBeforeConnecting: a name that resolves to loopback (localhost) is
// refused by the dialer before connect(2): the listener accepts nothing, the error is
// an *EgressError naming the address; allowed, the same request goes through.
func TestEgressRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				accepted.Add(1)
			}
		}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + strings.Replace(ln.Addr().String(), "127.0.0.1", "localhost", 1) + "/"

	_, err = (&http.Client{Transport: vendorhttp.Egress{Who: "tenant acme's target crm"}.Transport()}).Get(url)
	var ee *vendorhttp.EgressError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.True(t, ee.Addr.IsLoopback())
	require.ErrorContains(t, err, "tenant acme's target crm may not connect to ")
	require.Zero(t, accepted.Load(), "the listener saw a connection")

	allowed := vendorhttp.Egress{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	resp, err := (&http.Client{Transport: allowed.Transport()}).Get(url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, int64(1), accepted.Load())
}

// TestEgressCheck: the refused ranges, IPv4 mapped into IPv6 as IPv4, and what Allow
// lets through.
func TestEgressCheck(t *testing.T) {
	t.Parallel()
	e := vendorhttp.Egress{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	for addr, refused := range map[string]bool{
		"127.0.0.1": true, "::1": true, "::ffff:127.0.0.1": true, "169.254.169.254": true, "fe80::1": true,
		"10.0.0.1": true, "172.31.255.255": true, "192.168.0.1": true, "fd12::1": true, "0.0.0.0": true, "::": true,
		"224.0.0.251": true, "ff02::1": true, "100.100.100.200": true,
		"10.1.2.3": false, "203.0.113.9": false, "2001:db8::1": false, "8.8.8.8": false, "172.32.0.1": false,
	} {
		err := e.Check(netip.MustParseAddr(addr))
		require.Equal(t, refused, err != nil, "%s: %v", addr, err)
	}
}
