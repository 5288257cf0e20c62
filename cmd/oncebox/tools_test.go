package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendors/fakewebhook"
)

// TestToolsCheckVerdicts: `oncebox tools check` says native_keys is safe for a target
// that honours keys and is not for one that ignores them.
func TestToolsCheckVerdicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		honour bool
		want   string
	}{
		{true, "verdict: native_keys: true is safe for crm"},
		{false, "verdict: native_keys: true is NOT safe for crm"},
	} {
		fake := fakewebhook.New(fakewebhook.Config{HonourKeys: tc.honour})
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		path := writeTools(t, crmCatalog(srv.URL, true))
		var out bytes.Buffer
		err := runToolsTo(context.Background(), []string{"check", "crm.create_lead", "--tools-file", path, "--args", `{"name":"Ada"}`, "--settle", "1s"}, &out)
		require.NoError(t, err)
		require.Contains(t, out.String(), tc.want)
		require.Contains(t, out.String(), "verdict: the lookup path finds a dropped call")
	}
	err := runToolsTo(context.Background(), []string{"check"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "usage: oncebox tools check NAME --args JSON")
}
