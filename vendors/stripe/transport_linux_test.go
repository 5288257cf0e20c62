package stripe

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// TestDefaultTransportAbortsOnClose: the default client's connections are aborted when
// closed, so a request given up on is not delivered later (internal/vendorhttp).
func TestDefaultTransportAbortsOnClose(t *testing.T) {
	t.Parallel()
	tr := Config{}.withDefaults().HTTPClient.Transport.(*http.Transport)
	aborts, err := vendorhttp.AbortsOnClose(t.Context(), tr)
	require.NoError(t, err)
	require.True(t, aborts)
}
