package catalog_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// checkCatalog is one write tool on a target at url.
func checkCatalog(t *testing.T, url string, nativeKeys bool) *catalog.Runtime {
	t.Helper()
	native := "false"
	if nativeKeys {
		native = "true"
	}
	c, err := catalog.Parse("tools.yaml", []byte(`
targets:
  crm:
    base_url: `+url+`
    native_keys: `+native+`
    lookup_path: /_lookup
tools:
  crm.create_lead:
    description: Create a lead.
    class: write
    target: crm
    path: /leads
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
`), nil)
	require.NoError(t, err)
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	return rt
}

func runCheck(t *testing.T, rt *catalog.Runtime) *catalog.CheckReport {
	t.Helper()
	rep, err := rt.Check(context.Background(), "crm.create_lead", json.RawMessage(`{"name":"Ada"}`), catalog.CheckOptions{Settle: time.Second})
	require.NoError(t, err)
	t.Log("\n" + rep.String())
	require.Len(t, rep.Runs, 3)
	return rep
}

// TestCheckTargetHonouringKeys: against a target that honours Idempotency-Key, every
// scenario makes one object and native_keys is safe; the lookup finds the dropped call.
func TestCheckTargetHonouringKeys(t *testing.T) {
	t.Parallel()
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	rep := runCheck(t, checkCatalog(t, srv.URL, true))
	for _, s := range rep.Runs {
		require.Equal(t, 1, s.Objects, s.Name)
		require.Len(t, fake.EffectsFor(s.OpID), 1, s.Name)
	}
	require.True(t, *rep.NativeKeysSafe)
	require.Empty(t, rep.Contradiction())
	require.True(t, *rep.LookupFindsDropped)
	require.Contains(t, rep.String(), "verdict: native_keys: true is safe for crm")
}

// TestCheckTargetIgnoringKeys: against a target that ignores the key, a reused key
// makes two objects: native_keys: true is not safe.
func TestCheckTargetIgnoringKeys(t *testing.T) {
	t.Parallel()
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	rep := runCheck(t, checkCatalog(t, srv.URL, true))
	for _, s := range rep.Runs {
		require.Equal(t, 2, s.Objects, s.Name)
		require.Len(t, fake.EffectsFor(s.OpID), 2, s.Name, "the count is the target's own")
	}
	require.False(t, *rep.NativeKeysSafe)
	require.Contains(t, rep.Contradiction(), "the file says native_keys: true for target crm")
	require.True(t, *rep.LookupFindsDropped)
	require.Contains(t, rep.String(), "verdict: native_keys: true is NOT safe for crm")
}

// TestCheckLookupBlind: a lookup path that never lists anything is caught: the
// dropped call is not found.
func TestCheckLookupBlind(t *testing.T) {
	t.Parallel()
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/_lookup" {
			_, _ = w.Write([]byte(`{"objects":[]}`))
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rep := runCheck(t, checkCatalog(t, srv.URL, true))
	require.False(t, *rep.LookupFindsDropped)
	require.False(t, *rep.NativeKeysSafe, "objects the lookup cannot see cannot be counted as one")
	require.Contains(t, rep.String(), "the lookup path did NOT find the call whose answer was dropped")
	require.Equal(t, 3, fake.EffectCount(), "the target did act, once per scenario")
}

// TestCheckWithoutLookupPath: a target without a lookup path is sent the scenarios; the
// report counts no objects and says what it could not check, and states no verdict.
func TestCheckWithoutLookupPath(t *testing.T) {
	t.Parallel()
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := catalog.Parse("tools.yaml", []byte(`
targets:
  crm: {base_url: `+srv.URL+`, native_keys: true}
tools:
  crm.create_lead:
    description: Create a lead.
    class: write
    target: crm
    path: /leads
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
`), nil)
	require.NoError(t, err)
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	rep := runCheck(t, rt)
	for _, s := range rep.Runs {
		require.Equal(t, -1, s.Objects, s.Name)
		require.NotEmpty(t, s.Answers)
	}
	require.Nil(t, rep.NativeKeysSafe)
	require.Nil(t, rep.LookupFindsDropped)
	require.Empty(t, rep.Verdicts)
	require.Len(t, rep.Unchecked, 2)
	require.Empty(t, rep.Contradiction(), "what was not checked contradicts nothing")
	require.Contains(t, rep.String(), "not checked: whether native_keys: true is safe for crm: the target has no lookup_path")
	require.Contains(t, rep.String(), "objects made: ?")
	require.Equal(t, 6, fake.EffectCount(), "the calls were sent")
}

// TestCheckCompositeToolNamesItsSteps: a composite tool sends nothing of its own: the
// check refuses it with the steps' tools to check instead, and sends nothing.
func TestCheckCompositeToolNamesItsSteps(t *testing.T) {
	t.Parallel()
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := catalog.Parse("tools.yaml", []byte(`
targets:
  crm: {base_url: `+srv.URL+`}
tools:
  crm.create_lead:
    description: Create a lead.
    class: write
    target: crm
    path: /leads
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
  crm.onboard:
    description: Create the lead, then the account.
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
    steps:
      - {name: lead, tool: crm.create_lead, args: {name: {$from: /call/name}}}
`), nil)
	require.NoError(t, err)
	rt, err := c.Connect(catalog.Options{})
	require.NoError(t, err)
	_, err = rt.Check(context.Background(), "crm.onboard", json.RawMessage(`{"name":"Ada"}`), catalog.CheckOptions{Settle: time.Second})
	require.ErrorContains(t, err, "crm.onboard is a composite tool")
	require.ErrorContains(t, err, "lead (crm.create_lead)")
	require.Zero(t, fake.Requests())
}
