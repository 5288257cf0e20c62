package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// TestToolsCheckVerdicts: `oncebox tools check` says native_keys is safe for a target
// that honours keys and is not for one that ignores them.
func TestToolsCheckVerdicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		honour, native bool
		want           string
		exit           int
	}{
		{true, true, "verdict: native_keys: true is safe for crm", 0},
		{false, false, "verdict: native_keys: true is NOT safe for crm", 0},
		// The file says native_keys: true and the target ignores keys: exit 1.
		{false, true, "verdict: native_keys: true is NOT safe for crm", 1},
	} {
		fake := fakewebhook.New(fakewebhook.Config{HonourKeys: tc.honour})
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		path := writeTools(t, crmCatalog(srv.URL, tc.native))
		var out bytes.Buffer
		err := runToolsTo(context.Background(), []string{"check", "crm.create_lead", "--tools-file", path, "--args", `{"name":"Ada"}`, "--settle", "1s"}, &out)
		if tc.exit == 0 {
			require.NoError(t, err)
		} else {
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tc.exit, ee.code)
			require.ErrorContains(t, err, "the file says native_keys: true for target crm")
		}
		require.Contains(t, out.String(), tc.want)
		require.Contains(t, out.String(), "verdict: the lookup path finds a dropped call")
	}

	// Without lookup_path it runs, and says what it could not check.
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	path := writeTools(t, strings.Replace(crmCatalog(srv.URL, true), " lookup_path: /_lookup", "", 1))
	var out bytes.Buffer
	err := runToolsTo(context.Background(), []string{"check", "crm.create_lead", "--tools-file", path, "--args", `{"name":"Ada"}`, "--settle", "1s"}, &out)
	require.NoError(t, err)
	require.Contains(t, out.String(), "not checked: whether native_keys: true is safe for crm: the target has no lookup_path")
	require.Equal(t, 6, fake.EffectCount())

	err = runToolsTo(context.Background(), []string{"check"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "usage: oncebox tools check NAME --args JSON")
}
