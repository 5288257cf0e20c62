package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// redactingTool is echoTool with a Redact, as the mail tool has.
func redactingTool() vendorapi.Tool {
	t := echoTool("echo")
	t.Name = "test.secret"
	t.Redact = func(json.RawMessage) json.RawMessage { return json.RawMessage(`{"redacted":true}`) }
	return t
}

// TestRedactedToolFingerprintIsKeyed: for a tool that redacts, the fingerprint stored,
// compared and shown is keyed by the seal key, so that it cannot confirm a guess of the
// redacted arguments offline; replays and conflicts behave as with a plain one. A tool
// without redaction keeps its plain SHA-256.
func TestRedactedToolFingerprintIsKeyed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	reg, err := outbox.NewRegistry(redactingTool(), echoTool("echo"))
	require.NoError(t, err)
	sealKey := make([]byte, seal.KeySize)
	sealKey[0] = 1
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, SealKey: sealKey})
	require.NoError(t, err)
	tenant := optest.Tenant(t, pool, "acme")

	args := json.RawMessage(`{"n":424242}`)
	plain, err := outbox.ComputeFingerprint("test.secret", args)
	require.NoError(t, err)

	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "test.secret", Args: args})
	require.NoError(t, err)
	require.NotEqual(t, plain, res.Op.Fingerprint, "the fingerprint of a redacting tool must not be the plain SHA-256 of its args")
	var stored []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT fingerprint FROM oncebox_op WHERE id = $1", res.Op.ID).Scan(&stored))
	require.NotEqual(t, plain[:], stored, "nor may the stored one")
	fp, err := ob.Fingerprint("test.secret", args)
	require.NoError(t, err)
	require.Equal(t, fp, res.Op.Fingerprint)

	// Another seal key gives another fingerprint: it is keyed.
	otherKey := make([]byte, seal.KeySize)
	other, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, SealKey: otherKey})
	require.NoError(t, err)
	fp2, err := other.Fingerprint("test.secret", args)
	require.NoError(t, err)
	require.NotEqual(t, fp, fp2)

	// Replay (another spelling) and conflict as before.
	rep, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "test.secret", Args: json.RawMessage(`{ "n": 424242.0 }`)})
	require.NoError(t, err)
	require.True(t, rep.Replayed)
	require.Equal(t, res.Op.ID, rep.Op.ID)
	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "test.secret", Args: json.RawMessage(`{"n":424243}`)})
	var kc *outbox.KeyConflictError
	require.True(t, errors.As(err, &kc), "got %v", err)
	otherPlain, err := outbox.ComputeFingerprint("test.secret", json.RawMessage(`{"n":424243}`))
	require.NoError(t, err)
	require.Equal(t, fp, kc.Stored)
	require.NotEqual(t, otherPlain, kc.Given, "the conflict shows keyed fingerprints only")

	// An op holding the plain fingerprint of a redacting tool's payload is a conflict: no
	// release stored one (v0.1.0 keyed them already), so nothing treats it as a replay.
	_, err = pool.Exec(ctx, "UPDATE oncebox_op SET fingerprint = $2 WHERE id = $1", res.Op.ID, plain[:])
	require.NoError(t, err)
	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "test.secret", Args: args})
	require.True(t, errors.As(err, &kc), "got %v", err)

	// A tool without redaction keeps the plain fingerprint.
	echoArgs := json.RawMessage(`{"n":7}`)
	plainEcho, err := outbox.ComputeFingerprint("test.echo", echoArgs)
	require.NoError(t, err)
	res, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k2", Tool: "test.echo", Args: echoArgs})
	require.NoError(t, err)
	require.Equal(t, plainEcho, res.Op.Fingerprint)
}
