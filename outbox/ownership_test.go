package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// actTool is a tool of vendor "things" that acts on the existing object named by its
// argument thing, asking tag when the tenant's ops and adoptions do not name it.
func actTool(tag func(context.Context, string) (string, error)) vendorapi.Tool {
	return vendorapi.Tool{Name: "test.act", Vendor: "things", Validate: func(json.RawMessage) error { return nil },
		Objects: []vendorapi.ObjectArg{{Arg: "thing", Tag: tag}}}
}

// TestObjectsOfAnOpStayTheTenantsAfterThePurge: an object made by acme's op may be acted
// on by acme, not by globex (refused with a *NotOwnedError, nothing stored), its reference
// recorded as a v0.1.0 process records it (oncebox_op.vendor_ref only: the trigger of
// migration 034 copies it to oncebox_op_ref, which is read); once the purge deletes the op
// and its oncebox_op_ref row, the object stays acme's (kept as adopted by the purge).
func TestObjectsOfAnOpStayTheTenantsAfterThePurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	reg, err := outbox.NewRegistry(echoTool("things"), actTool(nil))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	acme, globex := optest.Tenant(t, pool, "acme"), optest.Tenant(t, pool, "globex")
	made, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: "make", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 'thing_1' WHERE id = $1`, made.Op.ID)
	require.NoError(t, err)
	refs := func() int {
		return dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op_ref WHERE tenant_id = $1 AND vendor_ref = 'thing_1' AND op_id = $2", acme, made.Op.ID)
	}
	require.Equal(t, 1, refs())
	act := func(tenant int64, key string) error {
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: key, Tool: "test.act", Args: json.RawMessage(`{"thing":"thing_1"}`)})
		return err
	}

	require.NoError(t, act(acme, "act-1"))
	err = act(globex, "act-1")
	var no *outbox.NotOwnedError
	require.ErrorAs(t, err, &no)
	require.Equal(t, outbox.NotOwnedError{Arg: "thing", ID: "thing_1"}, *no)
	require.EqualError(t, err, "thing thing_1 is not one of this tenant's objects")
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op WHERE tenant_id = $1", globex))

	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET `+optest.Expired+` WHERE id = $1`, made.Op.ID)
	require.NoError(t, err)
	st, err := ob.Purge(ctx, purge.Config{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Ops)
	require.Zero(t, refs(), "the purged op's reference goes with it")
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_tenant_object WHERE tenant_id = $1 AND vendor = 'things' AND object_id = 'thing_1' AND adopted_by = $2",
		acme, "purge of op "+made.Op.ID))
	require.NoError(t, act(acme, "act-2"), "the purged op's object is still acme's")
	require.ErrorIs(t, act(globex, "act-2"), outbox.ErrNotOwned)
}

// TestObjectTaggedByTheVendor: an object none of the tenant's ops names is the tenant's
// when the vendor has it tagged with one of its ops of the tool's vendor; a tag naming
// another tenant's op, or nothing, is refused; a vendor that cannot be asked refuses the
// call with an *ObjectUnavailableError, storing nothing; a replay is never checked.
func TestObjectTaggedByTheVendor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	var tagged string
	var vendorErr error
	asked := 0
	reg, err := outbox.NewRegistry(echoTool("things"), actTool(func(_ context.Context, id string) (string, error) {
		asked++
		return tagged, vendorErr
	}))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	acme, globex := optest.Tenant(t, pool, "acme"), optest.Tenant(t, pool, "globex")
	made, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme, Key: "make", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET status = 'unknown' WHERE id = $1`, made.Op.ID)
	require.NoError(t, err)
	act := func(tenant int64, key string) (*outbox.EnqueueResult, error) {
		return ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: key, Tool: "test.act", Args: json.RawMessage(`{"thing":"thing_9"}`)})
	}

	tagged = made.Op.ID
	first, err := act(acme, "act-1")
	require.NoError(t, err)
	require.Equal(t, 1, asked)
	_, err = act(globex, "act-1")
	require.ErrorIs(t, err, outbox.ErrNotOwned, "the tag names acme's op")
	tagged = "not-an-op-id"
	_, err = act(acme, "act-2")
	require.ErrorIs(t, err, outbox.ErrNotOwned)

	vendorErr = errors.New("stripe: retrieve payment intent thing_9: api_error (, HTTP 500)")
	_, err = act(acme, "act-3")
	var un *outbox.ObjectUnavailableError
	require.ErrorAs(t, err, &un)
	require.Equal(t, "thing", un.Arg)
	require.ErrorIs(t, err, outbox.ErrObjectUnavailable)
	asked = 0
	again, err := act(acme, "act-1")
	require.NoError(t, err, "a replay is not checked again")
	require.True(t, again.Replayed)
	require.Equal(t, first.Op.ID, again.Op.ID)
	require.Zero(t, asked)
	require.Equal(t, 2, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"), "the make op and act-1, nothing of the refusals")
}

// TestRegistryChecksObjects: a tool's Objects name distinct, non-empty arguments.
func TestRegistryChecksObjects(t *testing.T) {
	t.Parallel()
	tool := actTool(nil)
	tool.Objects = append(tool.Objects, vendorapi.ObjectArg{Arg: "thing"})
	_, err := outbox.NewRegistry(tool)
	require.EqualError(t, err, `tool "test.act": Objects names "thing" twice`)
	tool.Objects = []vendorapi.ObjectArg{{}}
	_, err = outbox.NewRegistry(tool)
	require.EqualError(t, err, `tool "test.act": Objects names an empty argument`)
}
