package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// TestRenderOpBytes pins the op's JSON byte for byte: member names, their order, empty
// members sent rather than left out, result and error exactly as stored (white space
// and escapes kept, null when absent), times in UTC, and the history's members.
func TestRenderOpBytes(t *testing.T) {
	t.Parallel()
	paris := time.FixedZone("Paris", 3600)
	at := time.Date(2026, 3, 4, 5, 6, 7, 890000000, paris)
	finished := at.Add(time.Second)
	var fp outbox.Fingerprint
	fp[0], fp[31] = 0xab, 0x01
	full := &outbox.Op{
		ID: "0192b6c4-7a3e-7cde-8f01-23456789abcd", Key: "order-1", Tool: "stripe.refund",
		Fingerprint: fp, Status: protocol.StatusSucceeded, Attempts: 2, VendorRef: "re_1",
		Result:         json.RawMessage("{ \"id\": \"re_1\", \"html\": \"<b>&</b>\" }"),
		Error:          json.RawMessage(`{"code":"x"}`),
		ConversationID: "conv-1", ToolCallID: "call-1",
		CreatedAt: at, UpdatedAt: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour),
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	empty := &outbox.Op{ID: "id", Key: "k", Tool: "t", Status: protocol.StatusPending, Error: json.RawMessage("not json")}
	history := &outbox.History{
		Attempts: []outbox.Attempt{{Attempt: 1, StartedAt: at, FinishedAt: &finished, Outcome: "success", VendorRef: "re_1", VendorKey: "vk"}},
		Events:   []outbox.Event{{At: at, Kind: "approved", FromStatus: "awaiting_approval", ToStatus: "pending", Actor: "ada"}},
		Matches:  []outbox.IdentityMatch{{At: at, Differed: []string{"amount"}, Fingerprint: fp, ConversationID: "c", ToolCallID: "t"}},
	}
	zeroFP := "0000000000000000000000000000000000000000000000000000000000000000"
	fpHex := "ab000000000000000000000000000000000000000000000000000000000000" + "01"
	for _, c := range []struct {
		name string
		op   *outbox.Op
		h    *outbox.History
		want string
	}{
		{"full", full, nil, `{"id":"0192b6c4-7a3e-7cde-8f01-23456789abcd","key":"order-1","tool":"stripe.refund","status":"succeeded",` +
			`"fingerprint":"` + fpHex + `","attempts":2,"vendor_ref":"re_1","conversation_id":"conv-1","tool_call_id":"call-1",` +
			`"created_at":"2026-03-04T04:06:07.89Z","updated_at":"2026-03-04T04:07:07.89Z","expires_at":"2026-03-04T05:06:07.89Z","why":"",` +
			`"result":{ "id": "re_1", "html": "<b>&</b>" },"error":{"code":"x"}}` + "\n"},
		{"empty", empty, nil, `{"id":"id","key":"k","tool":"t","status":"pending","fingerprint":"` + zeroFP + `","attempts":0,` +
			`"vendor_ref":"","conversation_id":"","tool_call_id":"","created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z",` +
			`"expires_at":"0001-01-01T00:00:00Z","why":"","result":null,"error":null}` + "\n"},
		{"empty history", empty, &outbox.History{}, `{"id":"id","key":"k","tool":"t","status":"pending","fingerprint":"` + zeroFP + `","attempts":0,` +
			`"vendor_ref":"","conversation_id":"","tool_call_id":"","created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z",` +
			`"expires_at":"0001-01-01T00:00:00Z","why":"","result":null,"error":null,` +
			`"history":{"trace_id":"","attempts":[],"events":[],"identity_matches":[]}}` + "\n"},
		{"history", full, history, `{"id":"0192b6c4-7a3e-7cde-8f01-23456789abcd","key":"order-1","tool":"stripe.refund","status":"succeeded",` +
			`"fingerprint":"` + fpHex + `","attempts":2,"vendor_ref":"re_1","conversation_id":"conv-1","tool_call_id":"call-1",` +
			`"created_at":"2026-03-04T04:06:07.89Z","updated_at":"2026-03-04T04:07:07.89Z","expires_at":"2026-03-04T05:06:07.89Z","why":"",` +
			`"result":{ "id": "re_1", "html": "<b>&</b>" },"error":{"code":"x"},` +
			`"history":{"trace_id":"0af7651916cd43dd8448eb211c80319c",` +
			`"attempts":[{"attempt":1,"started_at":"2026-03-04T04:06:07.89Z","finished_at":"2026-03-04T04:06:08.89Z","outcome":"success","error":"","vendor_ref":"re_1","vendor_key":"vk"}],` +
			`"events":[{"at":"2026-03-04T04:06:07.89Z","kind":"approved","from_status":"awaiting_approval","to_status":"pending","actor":"ada","detail":null}],` +
			`"identity_matches":[{"at":"2026-03-04T04:06:07.89Z","differed":["amount"],"fingerprint":"` + fpHex + `","conversation_id":"c","tool_call_id":"t"}]}}` + "\n"},
	} {
		got, err := renderOp(c.op, c.h, "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
