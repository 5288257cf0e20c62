package latevendor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
	"github.com/oncebox/oncebox/testkit/latevendor"
)

// TestHTTP2DeliversAGivenUpRequest: over HTTP/2 (vendorhttp.Transport offers h2) a
// request the client gave up on while the network held it back still reaches the
// vendor whole once the network heals: the cancel reset the stream, not the connection.
// Kept on HTTP/1.1 (vendorhttp.HTTP1Transport), the cancel aborts the connection and
// the request never arrives.
func TestHTTP2DeliversAGivenUpRequest(t *testing.T) {
	t.Parallel()
	h2, err := latevendor.DeliversAfterCancel(t.Context(), vendorhttp.Transport())
	require.NoError(t, err)
	require.Equal(t, "HTTP/2.0", h2.Proto)
	require.True(t, h2.Delivered, "over HTTP/2 the given-up request arrives late")

	h1, err := latevendor.DeliversAfterCancel(t.Context(), vendorhttp.HTTP1Transport())
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1", h1.Proto)
	require.False(t, h1.Delivered, "over HTTP/1.1 the aborted connection drops it")
}
