package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// TestLateFaultDeliversOnlyOverHTTP2: the late-delivery fault holds a POST until the
// client gives up, then delivers it late when the client's connection stayed open (an
// HTTP/2 stream reset), and drops it when the client closed the connection (HTTP/1.1,
// vendorhttp.HTTP1Transport): the receiver records one effect over HTTP/2, none over
// HTTP/1.1.
func TestLateFaultDeliversOnlyOverHTTP2(t *testing.T) {
	t.Parallel()
	vtls, err := newVendorTLS(t.TempDir(), []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	require.NoError(t, err)
	for _, c := range []struct {
		name      string
		transport *http.Transport
		proto     string
		effects   int
	}{
		{"h2", vendorhttp.Transport(), "HTTP/2.0", 1},
		{"h1", vendorhttp.HTTP1Transport(), "HTTP/1.1", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			recv := fakewebhook.New(fakewebhook.Config{})
			f := &fakes{tls: vtls}
			var counts lateCounts
			lf := newLateFault(recv, &counts, 1)
			lf.rate, lf.delay = 1, 200*time.Millisecond
			lf.on.Store(true)
			base, err := f.serve(lf, true)
			require.NoError(t, err)
			t.Cleanup(func() {
				for _, srv := range f.servers {
					_ = srv.Close()
				}
			})

			tr := c.transport
			if tr.TLSClientConfig == nil {
				tr.TLSClientConfig = &tls.Config{}
			}
			tr.TLSClientConfig.RootCAs = vtls.roots
			client := &http.Client{Transport: tr, Timeout: 300 * time.Millisecond}
			lf.on.Store(false)
			warm, err := client.Get(base + "/_effects")
			require.NoError(t, err)
			require.Equal(t, c.proto, warm.Proto)
			_ = warm.Body.Close()
			lf.on.Store(true)

			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/hooks/1", bytes.NewReader([]byte(`{"n":1}`)))
			require.NoError(t, err)
			req.Header.Set("Oncebox-Op", "op-1")
			_, err = client.Do(req)
			require.Error(t, err, "the fault holds the answer past the client's timeout")
			require.Eventually(t, func() bool { return counts.delivered.Load()+counts.dropped.Load() == 1 }, 3*time.Second, 20*time.Millisecond)
			time.Sleep(500 * time.Millisecond)
			require.Len(t, recv.Effects(), c.effects)
		})
	}
}
