package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestServeReloadsCatalogOnSIGHUP: a real `oncebox serve` reloads its tool catalog on
// SIGHUP and keeps running: the tool added to the file is listed and its op reaches
// the target; a broken file sent the same way is refused and the process stays up.
func TestServeReloadsCatalogOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	testReloadsCatalogOnSIGHUP(t, "serve", "ONCEBOX_ROLES=api,worker")
}

// TestDevReloadsCatalogOnSIGHUP: `oncebox dev` reloads its tool catalog on SIGHUP
// like serve.
func TestDevReloadsCatalogOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dev processes")
	}
	t.Parallel()
	testReloadsCatalogOnSIGHUP(t, "dev")
}

func testReloadsCatalogOnSIGHUP(t *testing.T, command string, env ...string) {
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	fake := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	file := crmCatalog(target.URL, false)
	added := file + `  crm.add_note:
    description: Add a note to a lead.
    class: write
    target: crm
    path: /leads/{lead}/notes
    input_schema: {type: object, properties: {lead: {type: string}, text: {type: string}}, required: [lead, text]}
`
	path := writeTools(t, file)
	addr := freeAddr(t)
	child, _ := startChild(t, command, append(env, "DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_ADDR="+addr,
		"ONCEBOX_TOOLS_FILE="+path, "ONCEBOX_WEBHOOK_TARGETS=", "STRIPE_API_KEY=", "SENDGRID_API_KEY=")...)
	base := "http://" + addr
	call := func(method, p, body string) (int, string) {
		req, err := http.NewRequest(method, base+p, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "note-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		status, _ := call(http.MethodGet, "/healthz", "")
		return status == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "serve on %s", addr)
	_, tools := call(http.MethodGet, "/v1/tools", "")
	require.NotContains(t, tools, "crm.add_note")

	// A broken file: refused, the process stays up with the catalog in force.
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(added, "path: /leads/{lead}/notes", "path: leads", 1)), 0o600))
	require.NoError(t, child.Process.Signal(syscall.SIGHUP))
	// The good file: the new tool is listed and works.
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte(added), 0o600))
	require.NoError(t, child.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		_, tools := call(http.MethodGet, "/v1/tools", "")
		return strings.Contains(tools, `"name":"crm.add_note"`)
	}, 30*time.Second, 100*time.Millisecond, "the reloaded catalog is listed")
	status, body := call(http.MethodPost, "/v1/ops?wait=20s", `{"tool":"crm.add_note","args":{"lead":"L1","text":"called back"}}`)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, status, body)
	require.Contains(t, body, `"status":"succeeded"`, body)
	effects := fake.Effects()
	require.Len(t, effects, 1)
	require.Equal(t, "/leads/L1/notes", effects[0].Path)
}
