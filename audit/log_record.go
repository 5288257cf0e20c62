package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	otellog "go.opentelemetry.io/otel/log"
)

// Attribute keys of the streamed audit records (docs/audit.md "Streaming to a SIEM").
// With the record's timestamp, tenant, seq, tx, kind, op id, fingerprint and entry are
// every field the entry's hash covers (Canonical), so a receiver can recompute the chain.
const (
	AttrTenantID    = "oncebox.tenant.id"
	AttrTenantName  = "oncebox.tenant.name"
	AttrSeq         = "oncebox.audit.seq"
	AttrTx          = "oncebox.audit.tx"
	AttrKind        = "oncebox.audit.kind"
	AttrOpID        = "oncebox.audit.op_id"
	AttrFingerprint = "oncebox.audit.fingerprint"
	AttrHash        = "oncebox.audit.hash"
	AttrPrevHash    = "oncebox.audit.prev_hash"
	// AttrEntry is the entry's fields as Postgres prints the jsonb: the bytes its hash covers.
	AttrEntry = "oncebox.audit.entry"
	// AttrFieldPrefix prefixes the entry's fields flattened, one attribute per scalar
	// (oncebox.audit.field.to, oncebox.audit.field.row.name); an array is its JSON.
	AttrFieldPrefix = "oncebox.audit.field."
)

// LogRecord returns e as an OpenTelemetry log record: a sentence as its body, the event
// name oncebox.audit.<kind>, severity INFO, e.At as its timestamp and observed as its
// observed timestamp, and the attributes above (tenantName "": none).
func LogRecord(e *Entry, tenantName string, observed time.Time) otellog.Record {
	var r otellog.Record
	r.SetEventName("oncebox.audit." + e.Kind)
	r.SetTimestamp(e.At)
	r.SetObservedTimestamp(observed)
	r.SetSeverity(otellog.SeverityInfo)
	r.SetSeverityText("INFO")
	fields := decodeFields(e.Fields)
	r.SetBody(otellog.StringValue(summary(e, fields)))
	attrs := []otellog.KeyValue{
		otellog.Int64(AttrTenantID, e.TenantID),
		otellog.Int64(AttrSeq, e.Seq),
		otellog.Int64(AttrTx, int64(e.Tx)),
		otellog.String(AttrKind, e.Kind),
		otellog.String(AttrHash, hex.EncodeToString(e.Hash)),
		otellog.String(AttrPrevHash, hex.EncodeToString(e.PrevHash)),
		otellog.String(AttrEntry, string(e.Fields)),
	}
	if tenantName != "" {
		attrs = append(attrs, otellog.String(AttrTenantName, tenantName))
	}
	if e.OpID != "" {
		attrs = append(attrs, otellog.String(AttrOpID, e.OpID))
	}
	if e.Fingerprint != nil {
		attrs = append(attrs, otellog.String(AttrFingerprint, hex.EncodeToString(e.Fingerprint)))
	}
	r.AddAttributes(attrs...)
	r.AddAttributes(flatten(AttrFieldPrefix, fields)...)
	return r
}

// decodeFields reads an entry's fields, numbers as json.Number (nil when they are not
// a JSON object).
func decodeFields(raw []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return nil
	}
	return m
}

// flatten returns m's scalars as attributes under prefix, nested objects by their dotted
// path, in key order; an array is its JSON, a null is left out.
func flatten(prefix string, m map[string]any) []otellog.KeyValue {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []otellog.KeyValue
	for _, k := range keys {
		key := prefix + k
		switch v := m[k].(type) {
		case map[string]any:
			out = append(out, flatten(key+".", v)...)
		case string:
			out = append(out, otellog.String(key, v))
		case bool:
			out = append(out, otellog.Bool(key, v))
		case json.Number:
			if n, err := v.Int64(); err == nil {
				out = append(out, otellog.Int64(key, n))
			} else if f, err := v.Float64(); err == nil {
				out = append(out, otellog.Float64(key, f))
			} else {
				out = append(out, otellog.String(key, v.String()))
			}
		case []any:
			b, _ := json.Marshal(v)
			out = append(out, otellog.String(key, string(b)))
		}
	}
	return out
}

// summary is a record's body: what the entry says, in a few words.
func summary(e *Entry, f map[string]any) string {
	str := func(k string) string { s, _ := f[k].(string); return s }
	switch e.Kind {
	case "call":
		return fmt.Sprintf("op %s called %s on %s", e.OpID, str("tool"), str("vendor"))
	case "status":
		return fmt.Sprintf("op %s is now %s", e.OpID, str("to"))
	case "event":
		if actor := str("actor"); actor != "" {
			return fmt.Sprintf("op %s: %s by %s", e.OpID, str("event"), actor)
		}
		return fmt.Sprintf("op %s: %s", e.OpID, str("event"))
	case "approval_requested":
		return fmt.Sprintf("op %s awaits approval (%s)", e.OpID, str("why"))
	case "withdrawn":
		return fmt.Sprintf("op %s withdrawn while %s", e.OpID, str("status"))
	case "setting":
		return fmt.Sprintf("setting %s: %s", str("table"), str("op"))
	}
	return e.Kind
}
