package main

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// crmCatalog is the tools file the catalog tests load: one write tool, crm.create_lead,
// on a target named crm at baseURL with a lookup path.
func crmCatalog(baseURL string, nativeKeys bool) string {
	native := ""
	if nativeKeys {
		native = " native_keys: true,"
	}
	return `
targets:
  crm: {base_url: ` + baseURL + `,` + native + ` lookup_path: /_lookup}
tools:
  crm.create_lead:
    description: Create a lead.
    class: write
    target: crm
    path: /leads
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
`
}

// writeTools writes a tools file into the test's temporary folder and returns its path.
func writeTools(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// killWorkerFlags are the serve flags of the tests that SIGKILL a worker mid-call:
// short timeouts, so that the next serve settles the op within seconds.
const killWorkerFlags = " --webhook-timeout 2s --webhook-job-timeout 3s --stripe-timeout 2s --stripe-job-timeout 3s --sendgrid-timeout 2s --sendgrid-job-timeout 3s --rescue-after 5s --reconcile-sweep-timeout 4s --reconcile-interval 1s --reconcile-stuck-margin 1s --webhook-lookup-lag 3s --retry-max-backoff 1s"

// blockedCRM is the crm target of the kill tests: it acts on a call, then holds its
// answer until unblock, so that a worker can be killed between the two.
type blockedCRM struct {
	fake      *fakewebhook.Server
	toolsFile string
	release   chan struct{}
	effected  chan struct{}
}

// newBlockedCRM starts the target (it ignores keys: once-only is oncebox's doing) and
// writes the tools file that names it.
func newBlockedCRM(t *testing.T) *blockedCRM {
	t.Helper()
	c := &blockedCRM{fake: fakewebhook.New(fakewebhook.Config{}), release: make(chan struct{}), effected: make(chan struct{}, 10)}
	target := httptest.NewServer(c.fake)
	t.Cleanup(target.Close)
	c.fake.SetBlock(c.release)
	c.fake.EffectHook(func(fakewebhook.Effect) { c.effected <- struct{}{} })
	c.toolsFile = writeTools(t, crmCatalog(target.URL, false))
	return c
}

// waitActed waits until the target has acted on a call.
func (c *blockedCRM) waitActed(t *testing.T) {
	t.Helper()
	select {
	case <-c.effected:
	case <-time.After(20 * time.Second):
		t.Fatal("the serve child never reached the target")
	}
}

// kill SIGKILLs the worker holding the target's call, then lets the target answer:
// it acted once, and nobody recorded its answer.
func (c *blockedCRM) kill(t *testing.T, worker *exec.Cmd) {
	t.Helper()
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_, _ = worker.Process.Wait()
	c.fake.SetBlock(nil)
	close(c.release)
	require.Equal(t, 1, c.fake.EffectCount())
}

// apiProcess is the server of the test process in the kill tests: API role only (it
// dispatches nothing), on the crm catalog, with a tenant named acme.
func (c *blockedCRM) apiProcess(t testing.TB, pool *pgxpool.Pool, adjust func(*server.Config)) (*server.Server, *tenant.Tenant) {
	t.Helper()
	cfg := server.Defaults()
	cfg.DatabaseURL, cfg.Roles, cfg.ToolsFile = dbtest.ConnString(t, pool), server.Roles{API: true}, c.toolsFile
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := server.New(context.Background(), cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	tn, _, err := tenant.NewStore(pool).Create(context.Background(), "acme")
	require.NoError(t, err)
	return srv, tn
}
