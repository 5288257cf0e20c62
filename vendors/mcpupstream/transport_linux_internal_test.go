package mcpupstream

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// TestHTTPUpstreamTransportAbortsOnClose: an HTTP upstream's requests go through a
// transport whose connections are aborted when closed, so a call given up on is not
// delivered later (internal/vendorhttp).
func TestHTTPUpstreamTransportAbortsOnClose(t *testing.T) {
	t.Parallel()
	tr := (&Session{}).httpBase().(*http.Transport)
	aborts, err := vendorhttp.AbortsOnClose(t.Context(), tr)
	require.NoError(t, err)
	require.True(t, aborts)
}
