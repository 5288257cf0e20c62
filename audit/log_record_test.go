package audit_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/oncebox/oncebox/audit"
)

// TestLogRecordSaysWhatTheEntrySays: each kind's body is a sentence of its fields, and
// the fields flatten into one attribute per value (objects by their dotted path, arrays
// as their JSON, nulls left out).
func TestLogRecordSaysWhatTheEntrySays(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 10, 0, 0, 123456000, time.UTC)
	for _, c := range []struct {
		kind, op, fields, body string
	}{
		{"call", "o1", `{"tool": "refund_payment", "vendor": "stripe"}`, "op o1 called refund_payment on stripe"},
		{"status", "o1", `{"to": "succeeded", "attempts": 1}`, "op o1 is now succeeded"},
		{"event", "o1", `{"event": "approved", "actor": "grace"}`, "op o1: approved by grace"},
		{"event", "o1", `{"event": "reconciled"}`, "op o1: reconciled"},
		{"approval_requested", "o1", `{"why": "refund above $20"}`, "op o1 awaits approval (refund above $20)"},
		{"withdrawn", "o1", `{"status": "pending"}`, "op o1 withdrawn while pending"},
		{"setting", "", `{"table": "oncebox_tenant", "op": "update", "row": {"id": 1}}`, "setting oncebox_tenant: update"},
		{"something_new", "", `{}`, "something_new"},
	} {
		e := &audit.Entry{TenantID: 1, Seq: 7, Tx: 900, At: at, Kind: c.kind, OpID: c.op, Fields: json.RawMessage(c.fields)}
		r := audit.LogRecord(e, "", at.Add(time.Second))
		require.Equal(t, c.body, r.Body().AsString(), c.kind)
		require.Equal(t, "oncebox.audit."+c.kind, r.EventName())
		require.Equal(t, otellog.SeverityInfo, r.Severity())
		require.Equal(t, at, r.Timestamp())
		require.Equal(t, at.Add(time.Second), r.ObservedTimestamp())
	}

	e := &audit.Entry{TenantID: 3, Seq: 8, Tx: 901, At: at, Kind: "setting", Fields: json.RawMessage(
		`{"op": "insert", "row": {"name": "daily", "budget": {"amount": {"*": 5000}, "ratio": 0.5}, "tools": ["a", "b"], "note": null, "on": true}}`)}
	got := map[string]otellog.Value{}
	r := audit.LogRecord(e, "acme", at)
	r.WalkAttributes(func(kv otellog.KeyValue) bool { got[kv.Key] = kv.Value; return true })
	require.Equal(t, "acme", got[audit.AttrTenantName].AsString())
	require.Equal(t, int64(3), got[audit.AttrTenantID].AsInt64())
	require.Equal(t, int64(901), got[audit.AttrTx].AsInt64())
	require.Equal(t, "daily", got[audit.AttrFieldPrefix+"row.name"].AsString())
	require.Equal(t, int64(5000), got[audit.AttrFieldPrefix+"row.budget.amount.*"].AsInt64())
	require.Equal(t, 0.5, got[audit.AttrFieldPrefix+"row.budget.ratio"].AsFloat64())
	require.Equal(t, `["a","b"]`, got[audit.AttrFieldPrefix+"row.tools"].AsString())
	require.True(t, got[audit.AttrFieldPrefix+"row.on"].AsBool())
	_, hasNull := got[audit.AttrFieldPrefix+"row.note"]
	require.False(t, hasNull)
	_, hasOp := got[audit.AttrOpID]
	require.False(t, hasOp, "no op, no op id")
}
