package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// checkObjects refuses a new call that names an object (Tool.Objects) which is not the
// tenant's: it runs in the enqueue's transaction, after the insert told the call from a
// replay (a replay is never checked again) and before the gate. An op sent on an account
// whose objects are all the tenant's (sqlAccountOwned) is checked only against the objects
// other tenants made or adopted there (an account taken over keeps the old tenant's).
func (ob *Outbox) checkObjects(ctx context.Context, tx pgx.Tx, p *Prepared, op *Op) error {
	if len(p.Tool.Objects) == 0 {
		return nil
	}
	var whole bool
	if err := tx.QueryRow(ctx, sqlAccountOwned, p.params.TenantID, p.Tool.Vendor, op.VendorAccount).Scan(&whole); err != nil {
		return fmt.Errorf("outbox: read whose the vendor account is: %w", err)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(p.Args, &args); err != nil {
		return &vendorapi.ValidationError{Field: "args", Message: "must be a JSON object"}
	}
	for _, o := range p.Tool.Objects {
		id, ok := objectID(args[o.Arg])
		if !ok {
			continue // Absent (or not an id): the tool's validation decides.
		}
		check := ob.checkObject
		if whole {
			check = checkNotOthers
		}
		if err := check(ctx, tx, p.params.TenantID, p.Tool.Vendor, o, id); err != nil {
			return err
		}
	}
	return nil
}

// checkNotOthers refuses, on an account the tenant owns wholesale, an object another
// tenant's op made or another tenant adopted (the account was that tenant's before).
func checkNotOthers(ctx context.Context, tx pgx.Tx, tenantID int64, vendor string, o vendorapi.ObjectArg, id string) error {
	var others bool
	if err := tx.QueryRow(ctx, sqlObjectOthers, tenantID, vendor, id).Scan(&others); err != nil {
		return fmt.Errorf("outbox: read whether another tenant has the object: %w", err)
	}
	if others {
		return &NotOwnedError{Arg: o.Arg, ID: id}
	}
	return nil
}

// checkObject says whether the object id named by o is the tenant's, in order: made by
// one of its ops or adopted by it, else tagged by the vendor with one of its ops.
func (ob *Outbox) checkObject(ctx context.Context, tx pgx.Tx, tenantID int64, vendor string, o vendorapi.ObjectArg, id string) error {
	var owned bool
	if err := tx.QueryRow(ctx, sqlObjectOwned, tenantID, vendor, id).Scan(&owned); err != nil {
		return fmt.Errorf("outbox: read the tenant's objects: %w", err)
	}
	if owned {
		return nil
	}
	refused := &NotOwnedError{Arg: o.Arg, ID: id}
	if o.Tag == nil {
		return refused
	}
	opID, err := ob.objectTag(ctx, o, id)
	if err != nil {
		return &ObjectUnavailableError{Arg: o.Arg, ID: id, Err: err}
	}
	if !protocol.IsOpID(opID) {
		return refused
	}
	if err := tx.QueryRow(ctx, sqlTaggedOpOwned, tenantID, vendor, opID).Scan(&owned); err != nil {
		return fmt.Errorf("outbox: read the op an object is tagged with: %w", err)
	}
	if !owned {
		return refused
	}
	return nil
}

// objectID returns an argument's value as an object id: a non-empty string, or an
// integer as written.
func objectID(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, s != ""
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		return n.String(), true
	}
	return "", false
}
