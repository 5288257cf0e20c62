package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// TestDescribeOneClearSentencePerState: the first sentence of every answer says what
// happened, without contradicting itself, for new calls and replays alike.
func TestDescribeOneClearSentencePerState(t *testing.T) {
	t.Parallel()
	id := callIdentity{Occurrence: 1}
	for _, tc := range []struct {
		status          protocol.Status
		errJSON         string
		first, replayed string
	}{
		{protocol.StatusSucceeded, "", "Done: this email was carried out now", "This email was already requested earlier and was not repeated now: it was carried out then."},
		{protocol.StatusFailed, `{"message":"bad address"}`, "Not done: the vendor refused this email, so nothing was carried out (reason: bad address).",
			"This email was already requested earlier and was not repeated now: the vendor refused it then, so nothing was carried out (reason: bad address)."},
		{protocol.StatusRejected, "", "Not done: a person rejected this email, so it was not carried out and will not be.",
			"This email was already requested earlier and was not repeated now: a person rejected it, so it was not carried out and will not be."},
		{protocol.StatusAwaitingApproval, "", "Waiting for approval: this email needs a person's approval and has not been carried out;",
			"This email was already requested earlier and was not repeated now: it is waiting for a person's approval and has not been carried out."},
		{protocol.StatusNeedsReview, `{"class":"sealed_args","nothing_sent":true}`, "Held for review: this email is held for a person's review and was NOT sent to the vendor, so nothing was carried out.",
			"This email was already requested earlier and was not repeated now: it is held for a person's review and was NOT sent to the vendor, so nothing was carried out."},
		{protocol.StatusNeedsReview, `{"class":"unknown"}`, "Held for review: this email is held for a person's review because oncebox could not confirm whether the vendor carried it out, so it may have been done.",
			"This email was already requested earlier and was not repeated now: it is held for a person's review because oncebox could not confirm"},
		{protocol.StatusPending, "", "Not confirmed yet: this email is recorded and will be carried out at most once",
			"This email was already requested earlier and was not repeated now: the vendor has not confirmed it yet (status pending)"},
	} {
		op := &outbox.Op{Tool: "sendgrid.mail", Key: "k", Status: tc.status}
		if tc.errJSON != "" {
			op.Error = json.RawMessage(tc.errJSON)
		}
		first := describe(op, false, id, "10s")
		require.True(t, strings.HasPrefix(first, tc.first), "%s: %s", tc.status, first)
		again := describe(op, true, id, "10s")
		require.True(t, strings.HasPrefix(again, tc.replayed), "%s: %s", tc.status, again)
		for _, text := range []string{first, again} {
			require.NotContains(t, text, "in this conversation")
			require.NotContains(t, text, "ALREADY DONE")
		}
	}
}
