package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedactorKeepsOrderAndIsIdempotent: the named fields are replaced, in objects and
// through arrays, the rest keeps its order; redacting again changes nothing.
func TestRedactorKeepsOrderAndIsIdempotent(t *testing.T) {
	r := newRedactor([]string{"structuredContent.to", "content.text", "structuredContent.meta"}, []byte("k"))
	in := json.RawMessage(`{"structuredContent":{"zeta":1,"to":"ann@example.com","meta":{"a":1}},"content":[{"type":"text","text":"to ann"},{"type":"text","text":"again"}],"x":true}`)
	out := r(in)
	require.NotContains(t, string(out), "ann")
	require.Regexp(t, `^\{"structuredContent":\{"zeta":1,"to":"\[redacted hmac-sha256:[0-9a-f]{64}, 17 bytes\]","meta":\{"redacted":"hmac-sha256:[0-9a-f]{64}","bytes":7\}\},`+
		`"content":\[\{"type":"text","text":"\[redacted hmac-sha256:[0-9a-f]{64}, 8 bytes\]"\},\{"type":"text","text":"\[redacted [^"]+"\}\],"x":true\}$`, string(out))
	require.Equal(t, string(out), string(r(out)), "idempotent")
	require.Nil(t, newRedactor(nil, nil), "no paths, no redactor")
	plain := newRedactor([]string{"to"}, nil)(json.RawMessage(`{"to":"x"}`))
	require.Contains(t, string(plain), `[redacted sha256:`)
}
