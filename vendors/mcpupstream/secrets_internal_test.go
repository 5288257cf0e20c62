package mcpupstream

import (
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"
)

// TestScrubCutsEverySecret: the ${VAR} values, whole header values and their
// credential part are cut from text; a JSON-RPC error keeps its code, its message and
// data cut, and errors.Is still finds what it wrapped.
func TestScrubCutsEverySecret(t *testing.T) {
	t.Parallel()
	// The headers as the catalog expands them from Authorization: "Bearer ${T}",
	// X-Key: "pre-${K}-post" and X-Literal: "Token literal-cred-99".
	secrets := secretsOf(Config{Name: "mail", URL: "http://x", Vars: []string{"tok\"quoted1", "kkkk1234"},
		Headers: map[string]string{"Authorization": "Bearer tok\"quoted1", "X-Key": "pre-kkkk1234-post", "X-Literal": "Token literal-cred-99"}})
	for _, s := range []string{`tok"quoted1`, `tok\"quoted1`, "kkkk1234", "pre-kkkk1234-post", "literal-cred-99", "Token literal-cred-99"} {
		require.Equal(t, "a [redacted] b", scrubText(secrets, "a "+s+" b"), s)
	}
	sentinel := errors.New("sentinel")
	rpc := &jsonrpc.Error{Code: -32000, Message: "bad kkkk1234", Data: []byte(`{"seen":"Bearer tok\"quoted1"}`)}
	err := scrubErr(secrets, fmt.Errorf("%w: %w", sentinel, rpc))
	require.NotContains(t, err.Error(), "kkkk1234")
	var we *jsonrpc.Error
	require.ErrorAs(t, err, &we)
	require.EqualValues(t, -32000, we.Code)
	require.Equal(t, "bad [redacted]", we.Message)
	require.JSONEq(t, `{"seen":"[redacted]"}`, string(we.Data), "the whole header value")
	require.ErrorIs(t, err, sentinel)
}
