package server_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// children returns, by the state file in its arguments, the PID of each live child
// process of this test binary running bin.
func children(t *testing.T, bin string) map[string]int {
	t.Helper()
	out := map[string]int{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 3 && args[0] == bin {
			out[args[2]] = pid
		}
	}
	return out
}

// TestReloadKeepsUnchangedUpstreams: two stdio upstreams across three reloads. The
// first changes nothing: both keep their process. The second changes one upstream's
// arguments: it alone gets a new process, the old one ends. The third removes it: its
// process ends, and the other one's, kept all along, still sends ops. Never more than
// one process per upstream.
func TestReloadKeepsUnchangedUpstreams(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakemcp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/oncebox/oncebox/devkit/fakemcp/cmd/fakemcp").CombinedOutput()
	require.NoError(t, err, "%s", out)
	boxState, otherState, otherState2 := filepath.Join(dir, "box.json"), filepath.Join(dir, "other.json"), filepath.Join(dir, "other2.json")
	upstream := func(name, state string) string {
		return `
  ` + name + `:
    command: ` + bin + `
    args: [-state, ` + state + `]`
	}
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.WebhookTimeout = 3 * time.Second
	cfg.ToolsFile = writeCatalog(t, "upstreams:"+upstream("box", boxState)+upstream("other", otherState)+"\n")
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	_, err = srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	settle := func(want []string) map[string]int {
		t.Helper()
		var got map[string]int
		require.Eventually(t, func() bool {
			got = children(t, bin)
			if len(got) != len(want) {
				return false
			}
			for _, state := range want {
				if _, ok := got[state]; !ok {
					return false
				}
			}
			return true
		}, 20*time.Second, 50*time.Millisecond, "children: %v, want one per state file of %v", got, want)
		return got
	}
	reload := func(content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(cfg.ToolsFile, []byte(content), 0o600))
		require.NoError(t, srv.ReloadCatalog(ctx))
	}
	first := settle([]string{boxState, otherState})

	reload("upstreams:" + upstream("box", boxState) + upstream("other", otherState) + "\n")
	require.Equal(t, first, settle([]string{boxState, otherState}), "nothing changed: the same processes")

	reload("upstreams:" + upstream("box", boxState) + upstream("other", otherState2) + "\n")
	second := settle([]string{boxState, otherState2})
	require.Equal(t, first[boxState], second[boxState], "box unchanged: its process kept")

	reload("upstreams:" + upstream("box", boxState) + "\n")
	third := settle([]string{boxState})
	require.Equal(t, first[boxState], third[boxState])

	// The session kept across the reloads still sends.
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	_ = token
	tn, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "after-reloads", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"cy@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	waitStatus(t, pool, "box.send_mail", "succeeded")
	st, err := fakemcp.ReadState(boxState)
	require.NoError(t, err)
	require.Len(t, st.Mails, 1)
	require.Equal(t, third, children(t, bin), "no process started for the send")
}
