package fakemcp_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
)

// session connects an SDK client to fake over streamable HTTP.
func session(t *testing.T, fake *fakemcp.Server) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Release)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func send(cs *mcp.ClientSession, key, ref string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_mail",
		Meta:      mcp.Meta{fakemcp.MetaIdempotencyKey: key, fakemcp.MetaOpID: ref},
		Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi", "ref": ref}})
}

func TestNativeKeysAnswerAKeyFromTheMailItMade(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	fake.SetNativeKeys(true)
	cs := session(t, fake)
	a, err := send(cs, "k1", "op1")
	require.NoError(t, err)
	b, err := send(cs, "k1", "op1")
	require.NoError(t, err)
	require.Equal(t, a.StructuredContent, b.StructuredContent, "the same mail")
	_, err = send(cs, "k2", "op2")
	require.NoError(t, err)
	require.Len(t, fake.Mails(), 2)
	require.Equal(t, 3, fake.Calls())
	require.Equal(t, 1, fake.Replays())

	// Without native keys every call acts.
	plain := fakemcp.New()
	cs = session(t, plain)
	for range 2 {
		_, err := send(cs, "k1", "op1")
		require.NoError(t, err)
	}
	require.Len(t, plain.Mails(), 2)
	require.Zero(t, plain.Replays())
}

func TestAnswerHookAfterTheAnswer(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	answered := make(chan string, 1)
	fake.AnswerHook(func(opID string) { answered <- opID })
	_, err := send(session(t, fake), "k1", "op1")
	require.NoError(t, err)
	require.Equal(t, "op1", <-answered)
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()
	t.Run("isError", func(t *testing.T) {
		fake := fakemcp.New()
		fake.SetRandomFaults(map[fakemcp.FaultKind]float64{fakemcp.FaultIsError: 1}, 1)
		res, err := send(session(t, fake), "k1", "op1")
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Empty(t, fake.Mails())
		require.Equal(t, []fakemcp.Refusal{{OpID: "op1", Key: "k1", Ref: "op1"}}, fake.Refusals())
		require.Equal(t, map[fakemcp.FaultKind]int{fakemcp.FaultIsError: 1}, fake.Faults())
	})
	t.Run("drop after acting", func(t *testing.T) {
		fake := fakemcp.New()
		fake.SetRandomFaults(map[fakemcp.FaultKind]float64{fakemcp.FaultDropAfterActing: 1}, 1)
		_, err := send(session(t, fake), "k1", "op1")
		require.Error(t, err)
		require.Len(t, fake.Mails(), 1)
	})
	t.Run("hang after acting", func(t *testing.T) {
		fake := fakemcp.New()
		fake.SetHangFor(50 * time.Millisecond)
		fake.SetRandomFaults(map[fakemcp.FaultKind]float64{fakemcp.FaultHangAfterActing: 1}, 1)
		hooked := make(chan fakemcp.Mail, 1)
		fake.EffectHook(func(m fakemcp.Mail) { hooked <- m })
		res, err := send(session(t, fake), "k1", "op1")
		require.NoError(t, err)
		require.False(t, res.IsError, "an upstream that acted answers the mail, late")
		mails := fake.Mails()
		require.Len(t, mails, 1)
		require.Equal(t, mails[0], <-hooked, "the hook saw the mail before its answer")
		require.NotContains(t, mails[0].Meta, "fakemcp/fault", "the fault is not recorded as the caller's _meta")
		require.Equal(t, "k1", mails[0].Meta[fakemcp.MetaIdempotencyKey])
	})
	t.Run("a native key's replay is never refused", func(t *testing.T) {
		fake := fakemcp.New()
		fake.SetNativeKeys(true)
		cs := session(t, fake)
		_, err := send(cs, "k1", "op1")
		require.NoError(t, err)
		fake.SetRandomFaults(map[fakemcp.FaultKind]float64{fakemcp.FaultIsError: 1}, 1)
		res, err := send(cs, "k1", "op1")
		require.NoError(t, err)
		require.False(t, res.IsError)
		require.Len(t, fake.Mails(), 1)
		require.Empty(t, fake.Refusals())
	})
	t.Run("a native key's refusal is replayed, not acted on", func(t *testing.T) {
		// A late copy of a refused call (held back by a partition, say) arrives after
		// the refusal was answered: it gets the refusal, and no mail is sent.
		fake := fakemcp.New()
		fake.SetNativeKeys(true)
		cs := session(t, fake)
		fake.FailNext(1)
		res, err := send(cs, "k1", "op1")
		require.NoError(t, err)
		require.True(t, res.IsError)
		res, err = send(cs, "k1", "op1")
		require.NoError(t, err)
		require.True(t, res.IsError, "the key's answer is the refusal")
		require.Empty(t, fake.Mails())
		require.Len(t, fake.Refusals(), 1)
		require.Equal(t, 1, fake.Replays())
		_, err = send(cs, "k2", "op2")
		require.NoError(t, err)
		require.Len(t, fake.Mails(), 1, "another key acts")
	})
}

// TestFileBackedSharedByProcesses: two fakes on one state file (as two stdio
// processes) see each other's mails, numbered without a clash.
func TestFileBackedSharedByProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	connect := func() *mcp.ClientSession {
		fake, err := fakemcp.NewFileBacked(path, func() { t.Error("no crash was asked for") })
		require.NoError(t, err)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := fake.MCP().Connect(context.Background(), st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	a, b := connect(), connect()
	_, err := send(a, "k1", "op1")
	require.NoError(t, err)
	_, err = send(b, "k2", "op2")
	require.NoError(t, err)
	res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "find_mail", Arguments: map[string]any{"ref": "op2"}})
	require.NoError(t, err)
	found := res.StructuredContent.(map[string]any)["objects"].([]any)
	require.Len(t, found, 1, "a finds the mail b sent")
	require.Equal(t, "mail_2", found[0].(map[string]any)["id"])
	st, err := fakemcp.ReadState(path)
	require.NoError(t, err)
	require.Len(t, st.Mails, 2)
}

// TestWipeIsAGatedToolWithALookup: OfferWipe lists wipe_mailbox destructive and
// find_wipe read-only; a wipe is recorded with its ref and _meta, found by its ref,
// deduplicated on a native key; Reannotate lists it read-only.
func TestWipeIsAGatedToolWithALookup(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	fake.OfferWipe()
	fake.SetNativeKeys(true)
	cs := session(t, fake)
	ctx := context.Background()
	annotations := func() map[string]*mcp.ToolAnnotations {
		out := map[string]*mcp.ToolAnnotations{}
		for tool, err := range cs.Tools(ctx, nil) {
			require.NoError(t, err)
			out[tool.Name] = tool.Annotations
		}
		return out
	}
	ann := annotations()
	require.True(t, *ann["wipe_mailbox"].DestructiveHint)
	require.True(t, ann["find_wipe"].ReadOnlyHint)

	wipe := func(key, ref string) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wipe_mailbox",
			Meta:      mcp.Meta{fakemcp.MetaIdempotencyKey: key, fakemcp.MetaOpID: ref},
			Arguments: map[string]any{"mailbox": "ann", "ref": ref}})
		require.NoError(t, err)
		require.False(t, res.IsError)
		return res
	}
	a, b := wipe("k1", "op1"), wipe("k1", "op1")
	require.Equal(t, a.StructuredContent, b.StructuredContent, "the same wipe, from its key")
	wipe("k2", "op2")
	require.Equal(t, []fakemcp.Wipe{{ID: "wipe_1", Ref: "op1", Mailbox: "ann", OpID: "op1", Key: "k1"},
		{ID: "wipe_2", Ref: "op2", Mailbox: "ann", OpID: "op2", Key: "k2"}}, fake.Wipes())
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_wipe", Arguments: map[string]any{"ref": "op2"}})
	require.NoError(t, err)
	require.Contains(t, res.StructuredContent, "objects")
	require.Len(t, res.StructuredContent.(map[string]any)["objects"], 1)

	fake.Reannotate("wipe_mailbox", &mcp.ToolAnnotations{ReadOnlyHint: true})
	require.True(t, annotations()["wipe_mailbox"].ReadOnlyHint, "listed read-only now")
	require.Panics(t, func() { fakemcp.New().Reannotate("wipe_mailbox", nil) }, "not offered")
}

// TestGarbledCallsCountTheCallsInFlight: a garbled answer names its call's op and the
// calls in flight on its session when it was written.
func TestGarbledCallsCountTheCallsInFlight(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	cs := session(t, fake)
	acted, gate := make(chan struct{}, 1), make(chan struct{})
	fake.EffectHook(func(fakemcp.Mail) { acted <- struct{}{}; <-gate })
	done := make(chan error, 1)
	go func() {
		_, err := send(cs, "k1", "op1")
		done <- err
	}()
	<-acted
	fake.GarbageNext("count_mail", 1)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "count_mail", Meta: mcp.Meta{fakemcp.MetaOpID: "op2"}})
	require.Error(t, err, "its answer is garbage")
	close(gate)
	<-done // the SDK's client may fail it too: its session broke (oncebox's does not)
	require.Equal(t, []fakemcp.GarbledCall{{Tool: "count_mail", OpID: "op2", Concurrent: 1}}, fake.GarbledCalls())
}

// TestGarbageHoldWaitsForAnotherCall: with a garbage hold, a garbled answer is written
// once another call is in flight on its session.
func TestGarbageHoldWaitsForAnotherCall(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	fake.SetGarbageHold(10 * time.Second)
	cs := session(t, fake)
	fake.EffectHook(func(fakemcp.Mail) { time.Sleep(100 * time.Millisecond) })
	fake.GarbageNext("count_mail", 1)
	garbled := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "count_mail"})
		garbled <- err
	}()
	select {
	case err := <-garbled:
		t.Fatalf("the garbage was written with no other call in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	_, _ = send(cs, "k1", "op1") // the SDK's client may fail it: its session broke on the garbage
	require.Error(t, <-garbled)
	require.Equal(t, 1, fake.GarbledCalls()[0].Concurrent)
}
