package mcpupstream

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSSEGuard: a stream's good events pass as they came (odd spacing and CRLF
// included); an event that is no JSON-RPC message (a line that is no field, garbage at
// the stream's end), or one past the limit, ends the stream with an error for the
// stream's call; on the standalone stream a bad event is dropped.
func TestSSEGuard(t *testing.T) {
	good := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"
	for _, c := range []struct {
		name, stream, want string
	}{
		{"good", good + "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n", good + "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"},
		{"truncated", good + "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"resu\n\n", good + `event: message` + "\n" + `data: {"error":{"code":-32603,"message":"oncebox: the upstream's answer is not a JSON-RPC message (malformed or truncated); only this call fails"},"id":7,"jsonrpc":"2.0"}` + "\n\n"},
		{"too large", good + "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"x\":\"" + strings.Repeat("x", 2000) + "\"}}\n\n", good + `event: message` + "\n" + `data: {"error":{"code":-32603,"message":"oncebox: the upstream's answer is larger than max_result_bytes (1024 bytes); it was not read"},"id":7,"jsonrpc":"2.0"}` + "\n\n"},
		{"a line that is no field", good + "garbage{\n\n", good + malformed},
		{"garbage at the end", good + "data: garbage{", good + malformed},
		{"spaced", good + "event:message \r\ndata:  {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}  \r\n\r\n", good + "event:message \r\ndata:  {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}  \r\n\r\n"},
	} {
		tap := newRawTap()
		g := &sseGuard{src: bufio.NewReaderSize(strings.NewReader(c.stream), 64), body: io.NopCloser(nil), tap: tap, call: 7, limit: 1024}
		out, err := io.ReadAll(g)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, string(out), c.name)
	}

	// The standalone stream (no call): a bad event is dropped, the rest go on.
	g := &sseGuard{src: bufio.NewReaderSize(strings.NewReader(good+"data: garbage{\n\n"+good), 64), body: io.NopCloser(nil), tap: newRawTap(), limit: 1024}
	out, err := io.ReadAll(g)
	require.NoError(t, err)
	require.Equal(t, good+good, string(out))
}

// malformed is the event the guard ends a stream with for call 7's malformed answer.
const malformed = `event: message` + "\n" + `data: {"error":{"code":-32603,"message":"oncebox: the upstream's answer is not a JSON-RPC message (malformed or truncated); only this call fails"},"id":7,"jsonrpc":"2.0"}` + "\n\n"
