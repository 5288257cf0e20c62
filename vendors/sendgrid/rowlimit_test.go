package sendgrid

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

// TestRowLimitCountsRecipientsOfRedactedArgs: the reconciler passes the stored args,
// which are the redacted form when a seal key is set; the page must still hold two
// copies of a mail to many recipients.
func TestRowLimitCountsRecipientsOfRedactedArgs(t *testing.T) {
	t.Parallel()
	to := make([]string, 60)
	for i := range to {
		to[i] = fmt.Sprintf(`{"email":"user%d@example.com"}`, i)
	}
	args := json.RawMessage(`{"from":{"email":"shop@example.com"},"to":[` + strings.Join(to, ",") + `],"subject":"s","text":"t"}`)
	var redact func(json.RawMessage) json.RawMessage
	for _, tool := range tools.Builtin(tools.Config{RedactKey: []byte("k")}) {
		if tool.Name == protocol.ToolMail {
			redact = tool.Redact
		}
	}
	require.NotNil(t, redact)

	require.Equal(t, 121, rowLimit(args))
	require.Equal(t, 121, rowLimit(redact(args)))
	require.Equal(t, lookupLimit, rowLimit(json.RawMessage(`"garbage"`)))
}
