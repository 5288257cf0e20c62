package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/oncebox/oncebox/internal/storable"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/vendorapi"
)

// Prepared is a tool call validated once, whichever door it came in by (HTTP, MCP,
// stdio, the Go API): its key normalized, its arguments checked against the tool and
// what Postgres can store, and its fingerprint computed. EnqueuePrepared records it
// without validating it again.
type Prepared struct {
	// Key is the normalized idempotency key ("" until WithKey, for PrepareUnkeyed).
	Key         string
	Tool        vendorapi.Tool
	Args        json.RawMessage
	Fingerprint Fingerprint
	// params are the call's, Key and Args as normalized.
	params EnqueueParams
}

// Prepare validates a tool call without touching the database: the tenant, the key,
// the conversation references, the arguments and the tool, and computes the
// fingerprint.
func (ob *Outbox) Prepare(params EnqueueParams) (*Prepared, error) {
	return ob.prepare(params, true)
}

// PrepareUnkeyed is Prepare for a caller that derives the call's key from the call
// itself (its fingerprint, its identity): params.Key is ignored. Give the prepared call
// its key with WithKey before enqueueing it.
func (ob *Outbox) PrepareUnkeyed(params EnqueueParams) (*Prepared, error) {
	return ob.prepare(params, false)
}

// WithKey returns the prepared call under the idempotency key key (normalized with
// NormalizeKey). byIdentity is EnqueueParams.ByIdentity.
func (p *Prepared) WithKey(key string, byIdentity bool) (*Prepared, error) {
	k, err := protocol.NormalizeKey(key)
	if err != nil {
		return nil, err
	}
	out := *p
	out.Key, out.params.Key, out.params.ByIdentity = k, k, byIdentity
	return &out, nil
}

func (ob *Outbox) prepare(params EnqueueParams, keyed bool) (*Prepared, error) {
	if params.TenantID == 0 {
		return nil, errors.New("outbox: EnqueueParams.TenantID is required")
	}
	key := ""
	if keyed {
		var err error
		if key, err = protocol.NormalizeKey(params.Key); err != nil {
			return nil, err
		}
		if strings.HasPrefix(key, steps.KeyPrefix) && !params.step {
			return nil, &protocol.KeyError{Rule: "reserved", Detail: fmt.Sprintf("begins with %q, which oncebox keeps for the steps of composite tools", steps.KeyPrefix)}
		}
	}
	for _, f := range []struct{ name, value string }{{"conversation_id", params.ConversationID}, {"tool_call_id", params.ToolCallID}} {
		if len(f.value) > MaxRefBytes {
			return nil, &vendorapi.ValidationError{Field: f.name, Message: fmt.Sprintf("is %d bytes long; the limit is %d", len(f.value), MaxRefBytes)}
		}
		if err := storable.CheckText(f.name, f.value); err != nil {
			return nil, err
		}
	}
	args, err := checkArgs(params.Args)
	if err != nil {
		return nil, err
	}
	tool, err := ob.cfg.Tools.ValidateFor(params.TenantID, params.Tool, args)
	if err != nil {
		return nil, err
	}
	fp, err := ob.Fingerprint(params.Tool, args)
	if err != nil {
		return nil, &vendorapi.ValidationError{Field: "args", Message: err.Error()}
	}
	params.Key, params.Args = key, args
	return &Prepared{Key: key, Tool: tool, Args: args, Fingerprint: fp, params: params}, nil
}

// checkArgs checks an args document's size, syntax and what Postgres can store, and
// returns it ({} when empty).
func checkArgs(args json.RawMessage) (json.RawMessage, error) {
	if len(args) > MaxArgsBytes {
		return nil, &vendorapi.ValidationError{Field: "args", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(args), MaxArgsBytes)}
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, &vendorapi.ValidationError{Field: "args", Message: "is not valid JSON"}
	}
	// What Postgres cannot store is refused here rather than failing at insert.
	if err := storable.CheckJSON("args", args); err != nil {
		return nil, err
	}
	return args, nil
}
