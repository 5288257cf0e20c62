package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// IdentityMatch is a call matched to an op by its tool's identity fields (Tool.Identity)
// and answered with that op instead of being executed: the same operation asked in other
// words.
type IdentityMatch struct {
	// At is when the call was matched.
	At time.Time
	// Differed are the top-level arguments of the call that differ from the op's, sorted;
	// nil when they could not be compared (the op's stored arguments are redacted and no
	// sealed copy is kept).
	Differed []string
	// Fingerprint is the fingerprint of the call's whole payload.
	Fingerprint Fingerprint
	// ConversationID and ToolCallID are the call's.
	ConversationID string
	ToolCallID     string
}

// IdentityFingerprint returns the fingerprint of the arguments that identify a call of
// the tool (Tool.Identity): of args keeping only those fields, keyed like Fingerprint.
// declared is false when the tool declares no identity: every argument identifies its
// ops, and the fingerprint returned is then Fingerprint's. args must be valid JSON.
func (ob *Outbox) IdentityFingerprint(tool string, args json.RawMessage) (fp Fingerprint, declared bool, err error) {
	t, ok := ob.cfg.Tools.Lookup(tool)
	if !ok || len(t.Identity) == 0 {
		fp, err = ob.Fingerprint(tool, args)
		return fp, false, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(args, &all); err != nil || all == nil {
		fp, err = ob.Fingerprint(tool, args)
		return fp, false, err
	}
	kept := map[string]json.RawMessage{}
	for _, f := range t.Identity {
		if v, ok := all[f]; ok {
			kept[f] = v
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return Fingerprint{}, false, fmt.Errorf("outbox: identity of a %s call: %w", tool, err)
	}
	fp, err = ob.Fingerprint(tool, b)
	return fp, true, err
}

// KeyByIdentity returns the idempotency key that calls of the same identity share while
// a window is open for them, as KeyInWindow does for identical calls: identity names the
// calls (their tool's identity fields, occurrence and scope, hashed by the caller);
// payload, when not "", names the calls identical to this one as KeyInWindow's call did
// (v0.1.0 opened windows under it). The key is that of payload's open window when there
// is one (the very same call, seen before, perhaps by a v0.1.0 process), else that of
// identity's, else fresh; both windows are left open under the key returned, so that a
// v0.1.0 process sends an identical call under it too.
//
// A key returned may hold an op whose payload differs from the call's in fields outside
// the identity: enqueue the call with EnqueueParams.ByIdentity to have it matched to that
// op rather than refused as a key conflict.
func (ob *Outbox) KeyByIdentity(ctx context.Context, tenantID int64, identity, payload, fresh string, window time.Duration) (string, error) {
	if tenantID == 0 || identity == "" || identity == payload || window <= 0 {
		return "", errors.New("outbox: KeyByIdentity needs a tenant, an identity other than the payload and a positive window")
	}
	if _, err := protocol.NormalizeKey(fresh); err != nil {
		return "", err
	}
	var key string
	if err := ob.pool.QueryRow(ctx, sqlKeyByIdentity, tenantID, identity, payload, fresh, window.Seconds()).Scan(&key); err != nil {
		return "", fmt.Errorf("outbox: identity window: %w", err)
	}
	return key, nil
}

// matchTx records, in the enqueue's transaction, that the call p was matched to op by
// its tool's identity, and returns the match.
func (ob *Outbox) matchTx(ctx context.Context, tx pgx.Tx, params EnqueueParams, p *Prepared, op *Op) (*IdentityMatch, error) {
	m := &IdentityMatch{Fingerprint: p.Fingerprint, ConversationID: params.ConversationID, ToolCallID: params.ToolCallID}
	earlier, ok, err := ob.fullArgs(ctx, tx, p.Tool, op)
	if err != nil {
		return nil, err
	}
	if ok {
		m.Differed = differed(earlier, p.Args)
	}
	if err := tx.QueryRow(ctx, sqlInsertIdentityMatch, op.ID, params.TenantID, p.Fingerprint[:], m.Differed,
		params.ConversationID, params.ToolCallID).Scan(&m.At); err != nil {
		return nil, fmt.Errorf("outbox: record identity match: %w", err)
	}
	return m, nil
}

// fullArgs returns the whole arguments of op, its tool being tool: its stored ones, or
// the sealed copy for a tool that redacts them. ok is false when they are redacted and
// no sealed copy can be opened.
func (ob *Outbox) fullArgs(ctx context.Context, tx pgx.Tx, tool vendorapi.Tool, op *Op) (json.RawMessage, bool, error) {
	if tool.Redact == nil {
		return op.Args, true, nil
	}
	if ob.sealer == nil {
		return nil, false, nil
	}
	var sealed []byte
	if err := tx.QueryRow(ctx, sqlSealedArgs, op.TenantID, op.ID).Scan(&sealed); err != nil {
		return nil, false, fmt.Errorf("outbox: read sealed args: %w", err)
	}
	if len(sealed) == 0 {
		return nil, false, nil
	}
	args, err := ob.sealer.Open(op.TenantID, op.Key, sealed)
	if err != nil {
		return nil, false, nil // not comparable; the match stands
	}
	return args, true, nil
}

// differed returns, sorted, the top-level fields whose values differ between two
// argument objects (present in one only included); nil when either is not an object.
func differed(a, b json.RawMessage) []string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil || ma == nil || mb == nil {
		return nil
	}
	out := []string{}
	for k, va := range ma {
		vb, ok := mb[k]
		if !ok || !sameJSON(va, vb) {
			out = append(out, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// sameJSON reports whether two JSON values are equal once canonical (RFC 8785).
func sameJSON(a, b json.RawMessage) bool {
	ca, errA := jcs.Transform(a)
	cb, errB := jcs.Transform(b)
	if errA != nil || errB != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return bytes.Equal(ca, cb)
}

// IdentityMatches returns the calls matched to the tenant's op by identity, oldest first.
func (ob *Outbox) IdentityMatches(ctx context.Context, tenantID int64, opID string) ([]IdentityMatch, error) {
	rows, err := ob.pool.Query(ctx, sqlIdentityMatches, tenantID, opID)
	if err != nil {
		return nil, fmt.Errorf("outbox: read identity matches: %w", err)
	}
	defer rows.Close()
	var out []IdentityMatch
	for rows.Next() {
		var (
			m  IdentityMatch
			fp []byte
		)
		if err := rows.Scan(&m.At, &fp, &m.Differed, &m.ConversationID, &m.ToolCallID); err != nil {
			return nil, fmt.Errorf("outbox: read identity matches: %w", err)
		}
		copy(m.Fingerprint[:], fp)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read identity matches: %w", err)
	}
	return out, nil
}
