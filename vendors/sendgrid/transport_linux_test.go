package sendgrid

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/vendorhttp"
	"github.com/oncebox/oncebox/testkit/latevendor"
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

// TestGivenUpRequestNotDeliveredOverHTTP2: against a TLS vendor speaking HTTP/2, the
// default client stays on HTTP/1.1, and a request it gave up on while the network held
// it back never arrives once the network heals (SendGrid has no idempotency keys: a late copy is a second mail once the lookup found nothing). Over HTTP/2 the cancel
// resets the stream only, and the vendor reads the whole request late
// (testkit/latevendor).
func TestGivenUpRequestNotDeliveredOverHTTP2(t *testing.T) {
	t.Parallel()
	tr := Config{}.withDefaults().HTTPClient.Transport.(*http.Transport)
	late, err := latevendor.DeliversAfterCancel(t.Context(), tr)
	require.NoError(t, err)
	require.False(t, late.Delivered, "the request given up on reached the vendor after the client gave up")
	require.Equal(t, "HTTP/1.1", late.Proto, "SendGrid is reached over HTTP/1.1")
}
