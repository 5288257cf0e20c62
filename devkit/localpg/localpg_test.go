package localpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// envOf returns an Env func backed by vars.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestStartFromEnv(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	for _, tc := range []struct {
		name       string
		vars       map[string]string
		envVars    []string
		wantURL    string
		wantSource string
	}{
		{
			name: "FirstSetVariableWins",
			vars: map[string]string{
				"TEST_DATABASE_URL": "postgres://tester@127.0.0.1:1/test?sslmode=disable",
				"DATABASE_URL":      "postgres://app@127.0.0.1:2/app?sslmode=disable",
			},
			envVars:    []string{"TEST_DATABASE_URL", "DATABASE_URL"},
			wantURL:    "postgres://tester@127.0.0.1:1/test?sslmode=disable",
			wantSource: "env:TEST_DATABASE_URL",
		},
		{
			name: "EmptyVariableIsSkipped",
			vars: map[string]string{
				"TEST_DATABASE_URL": " ",
				"DATABASE_URL":      "postgres://app@127.0.0.1:2/app?sslmode=disable",
			},
			envVars:    []string{"TEST_DATABASE_URL", "DATABASE_URL"},
			wantURL:    "postgres://app@127.0.0.1:2/app?sslmode=disable",
			wantSource: "env:DATABASE_URL",
		},
		{
			name: "DefaultsToDatabaseURL",
			vars: map[string]string{
				"TEST_DATABASE_URL": "postgres://tester@127.0.0.1:1/test",
				"DATABASE_URL":      "postgres://app@127.0.0.1:2/app",
			},
			wantURL:    "postgres://app@127.0.0.1:2/app",
			wantSource: "env:DATABASE_URL",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pg, err := Start(ctx, Config{Env: envOf(tc.vars), EnvVars: tc.envVars})
			require.NoError(t, err)
			require.Equal(t, tc.wantURL, pg.URL)
			require.Equal(t, tc.wantSource, pg.Source)
			require.NoError(t, pg.Close(ctx))
			require.NoError(t, pg.Close(ctx), "a second Close is a no-op")
		})
	}

	t.Run("UnusableURL", func(t *testing.T) {
		t.Parallel()
		_, err := Start(ctx, Config{Env: envOf(map[string]string{"DATABASE_URL": "postgres://a@127.0.0.1:notaport/x"})})
		require.ErrorContains(t, err, "DATABASE_URL is not a usable Postgres URL")
	})
}

func TestStartNothingAvailable(t *testing.T) {
	t.Parallel()

	pg, err := Start(t.Context(), Config{
		Env:            envOf(nil),
		DisablePrivate: true,
		DisableDocker:  true,
	})
	require.Nil(t, pg)
	require.ErrorIs(t, err, ErrNoPostgres)
	msg := err.Error()
	require.Equal(t, "no Postgres found: set DATABASE_URL, install the PostgreSQL server (postgresql package), or start Docker", msg)
	require.NotContains(t, msg, "\n")
	require.NotContains(t, msg, ". ", "one sentence only")
}

func TestProbe(t *testing.T) {
	t.Parallel()
	binDir := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.MkdirAll(binDir, 0o755))
	for _, name := range []string{"initdb", "postgres"} {
		require.NoError(t, os.WriteFile(filepath.Join(binDir, name), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	}
	noDocker := filepath.Join(t.TempDir(), "docker.sock")

	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"Env", Config{Env: envOf(map[string]string{"DATABASE_URL": "postgres://a@127.0.0.1:1/x"})}, "env:DATABASE_URL"},
		{"BlankEnvIsSkipped", Config{
			Env:           envOf(map[string]string{"DATABASE_URL": " ", "PATH": binDir}),
			DisableDocker: true,
		}, "private:" + binDir},
		{"EnvVarsEmptySkipsTheEnvironment", Config{
			Env:     envOf(map[string]string{"DATABASE_URL": "postgres://a@127.0.0.1:1/x", "PATH": binDir}),
			EnvVars: []string{},
		}, "private:" + binDir},
		{"Nothing", Config{Env: envOf(nil), DisablePrivate: true, DisableDocker: true}, ""},
		{"NoEngine", Config{Env: envOf(map[string]string{"DOCKER_HOST": "unix://" + noDocker}), DisablePrivate: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Probe(t.Context(), tc.cfg)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrNoPostgres)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// reachableTempDir returns a new folder under os.TempDir(), traversable so that an
// unprivileged user can reach it when the test runs as root (t.TempDir() is mode
// 0700), removed when the test ends.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "localpg-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(parent, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	return parent
}

// startCluster starts a Postgres with cfg and closes it when the test ends, if the
// test did not.
func startCluster(t *testing.T, cfg Config) *Postgres {
	t.Helper()
	pg, err := Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close(context.WithoutCancel(t.Context())) })
	return pg
}

// requireServerBinaries skips the test when this machine has no PostgreSQL
// server binaries outside PATH.
func requireServerBinaries(t *testing.T) string {
	t.Helper()
	binDir, ok := findBinDir(envOf(nil))
	if !ok {
		t.Skip("no PostgreSQL server binaries (initdb, postgres) found in /usr/lib/postgresql/*/bin or Homebrew; install the postgresql server package to run this test")
	}
	return binDir
}

// queryOne connects to databaseURL and scans one row of sql.
func queryOne(t *testing.T, databaseURL, sql string, dest ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), databaseURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	require.NoError(t, conn.QueryRow(t.Context(), sql).Scan(dest...))
}

func requirePortClosed(t *testing.T, databaseURL string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err == nil {
		_ = conn.Close()
	}
	require.Error(t, err, "port %s still answers after Close", u.Host)
}

func TestStartPrivate(t *testing.T) {
	t.Parallel()
	binDir := requireServerBinaries(t)
	ctx := t.Context()

	// Two at once: each process run takes its own locked data folder.
	var (
		wg   sync.WaitGroup
		pgs  [2]*Postgres
		errs [2]error
	)
	for i := range pgs {
		wg.Go(func() {
			pgs[i], errs[i] = Start(ctx, Config{Env: envOf(nil), DisableDocker: true})
		})
	}
	wg.Wait()
	for i, pg := range pgs {
		require.NoError(t, errs[i])
		t.Cleanup(func() { _ = pg.Close(context.WithoutCancel(ctx)) })
	}
	require.NotEqual(t, pgs[0].URL, pgs[1].URL)

	for _, pg := range pgs {
		require.Equal(t, "private:"+binDir, pg.Source)
		u, err := url.Parse(pg.URL)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", u.Hostname())
		require.NotEqual(t, "5432", u.Port())
		require.Equal(t, "/oncebox", u.Path)
		require.Equal(t, "disable", u.Query().Get("sslmode"))

		var (
			one     int
			db      string
			dataDir string
			sockets string
		)
		queryOne(t, pg.URL, "SELECT 1, current_database(), current_setting('data_directory'), current_setting('unix_socket_directories')",
			&one, &db, &dataDir, &sockets)
		require.Equal(t, 1, one)
		require.Equal(t, "oncebox", db)
		require.Empty(t, sockets)

		if os.Geteuid() == 0 {
			// As root the cluster belongs to an unprivileged user.
			info, err := os.Stat(dataDir)
			require.NoError(t, err)
			owner := strconv.Itoa(int(info.Sys().(*syscall.Stat_t).Uid))
			require.NotEqual(t, "0", owner)
			if u, err := user.Lookup("postgres"); err == nil {
				require.Equal(t, u.Uid, owner)
			}
		}
	}

	for _, pg := range pgs {
		require.NoError(t, pg.Close(ctx))
		requirePortClosed(t, pg.URL)
		require.NoError(t, pg.Close(ctx), "a second Close is a no-op")
	}
}

func TestStartPrivateDataDir(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()

	parent := reachableTempDir(t)
	cfg := Config{
		Env:           envOf(nil),
		DisableDocker: true,
		DataDir:       filepath.Join(parent, "data"),
		Database:      "reuse test",
	}

	pg := startCluster(t, cfg)
	require.FileExists(t, filepath.Join(cfg.DataDir, "PG_VERSION"))

	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('from the first run')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	// The folder is locked while its postmaster runs.
	_, err = Start(ctx, cfg)
	require.ErrorContains(t, err, "in use by another process")

	require.NoError(t, pg.Close(ctx))
	requirePortClosed(t, pg.URL)

	// A second run reuses the initialised folder and its data.
	pg2 := startCluster(t, cfg)
	var v string
	queryOne(t, pg2.URL, "SELECT v FROM kept", &v)
	require.Equal(t, "from the first run", v)
	require.NoError(t, pg2.Close(ctx))
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()

	fakeBin := func(t *testing.T, dir string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, name := range []string{"initdb", "postgres"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
		}
	}

	t.Run("PathFirst", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "bin")
		fakeBin(t, dir)
		got, ok := findBinDir(envOf(map[string]string{"PATH": "/nonexistent" + string(filepath.ListSeparator) + dir}))
		require.True(t, ok)
		require.Equal(t, dir, got)
	})

	t.Run("FolderNeedsBothPrograms", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "postgres"), []byte("#!/bin/sh\n"), 0o755))
		got, _ := findBinDir(envOf(map[string]string{"PATH": dir}))
		require.NotEqual(t, dir, got)
	})

	t.Run("HighestVersionFirst", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		for _, v := range []string{"9.6", "15", "10", "16"} {
			fakeBin(t, filepath.Join(root, "postgresql@"+v, "bin"))
		}
		fakeBin(t, filepath.Join(root, "postgresql", "bin"))
		got := globByVersion(filepath.Join(root, "postgresql*", "bin"), filepath.Join(root, "postgresql"))
		var names []string
		for _, dir := range got {
			names = append(names, filepath.Base(filepath.Dir(dir)))
		}
		require.Equal(t, []string{"postgresql", "postgresql@16", "postgresql@15", "postgresql@10", "postgresql@9.6"}, names)
	})
}

func TestDockerAnswers(t *testing.T) {
	t.Parallel()

	t.Run("NoEngineIsQuickAndFalse", func(t *testing.T) {
		t.Parallel()
		if _, err := os.Stat("/var/run/docker.sock"); err == nil {
			t.Skip("/var/run/docker.sock exists on this machine")
		}
		home := t.TempDir()
		// A socket file nobody listens on, as a stopped Docker Desktop leaves.
		stale := filepath.Join(home, ".docker", "run", "docker.sock")
		require.NoError(t, os.MkdirAll(filepath.Dir(stale), 0o755))
		l, err := net.Listen("unix", stale)
		require.NoError(t, err)
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, l.Close())

		begin := time.Now()
		require.False(t, dockerAnswers(t.Context(), envOf(map[string]string{"HOME": home})))
		require.False(t, dockerAnswers(t.Context(), envOf(map[string]string{"DOCKER_HOST": "unix://" + stale})))
		require.False(t, dockerAnswers(t.Context(), envOf(map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:1"})))
		require.Less(t, time.Since(begin), dockerProbeTimeout)
	})

	t.Run("EngineThatPings", func(t *testing.T) {
		t.Parallel()
		// Unix socket paths are short (108 bytes): not under t.TempDir().
		dir, err := os.MkdirTemp("", "dock")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		socket := filepath.Join(dir, "docker.sock")
		l, err := net.Listen("unix", socket)
		require.NoError(t, err)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/_ping" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte("OK"))
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })

		require.True(t, dockerAnswers(t.Context(), envOf(map[string]string{"DOCKER_HOST": "unix://" + socket})))

		// Without Config.Container (a binary built without -tags devcontainer), the
		// engine is found but not used: one sentence says how to get the fallback.
		cfg := Config{Env: envOf(map[string]string{"DOCKER_HOST": "unix://" + socket}), DisablePrivate: true}
		_, err = Start(t.Context(), cfg)
		require.ErrorIs(t, err, ErrNoPostgres)
		require.Contains(t, err.Error(), "-tags devcontainer")
		_, err = Probe(t.Context(), cfg)
		require.ErrorIs(t, err, ErrNoPostgres)

		// With it, Start calls it for the container.
		var asked string
		cfg.Container = func(_ context.Context, database string, _ *slog.Logger) (string, func(context.Context) error, error) {
			asked = database
			return "", nil, errors.New("no image here")
		}
		source, err := Probe(t.Context(), cfg)
		require.NoError(t, err)
		require.Equal(t, "testcontainers", source)
		_, err = Start(t.Context(), cfg)
		require.ErrorContains(t, err, "no image here")
		require.Equal(t, "oncebox", asked)
	})
}

// TestOrphanHelper is not a test: TestStartPrivateStopsOrphan runs it in a
// child process, which starts a cluster and exits without Close.
func TestOrphanHelper(t *testing.T) {
	dataDir := os.Getenv("LOCALPG_ORPHAN_DATADIR")
	if dataDir == "" {
		t.Skip("helper process for TestStartPrivateStopsOrphan")
	}
	pg, err := Start(t.Context(), Config{Env: envOf(nil), DisableDocker: true, DataDir: dataDir})
	if err != nil {
		fmt.Println("ERROR=" + strings.ReplaceAll(err.Error(), "\n", " | "))
		os.Exit(1)
	}
	fmt.Println("URL=" + pg.URL)
	os.Exit(0) // No Close: the postmaster is orphaned.
}

func TestStartPrivateStopsOrphan(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()

	parent := reachableTempDir(t)
	dataDir := filepath.Join(parent, "data")

	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOrphanHelper$", "-test.count=1")
	child.Env = append(os.Environ(), "LOCALPG_ORPHAN_DATADIR="+dataDir)
	out, err := child.Output()
	require.NoError(t, err, "helper output: %s", out)
	_, orphanURL, found := strings.Cut(string(out), "URL=")
	require.True(t, found, "helper output: %s", out)
	orphanURL, _, _ = strings.Cut(orphanURL, "\n")
	var one int
	queryOne(t, orphanURL, "SELECT 1", &one) // The orphan outlived its process.

	pg, err := Start(ctx, Config{Env: envOf(nil), DisableDocker: true, DataDir: dataDir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close(context.WithoutCancel(ctx)) })
	requirePortClosed(t, orphanURL)
	queryOne(t, pg.URL, "SELECT 1", &one)
	require.NoError(t, pg.Close(ctx))
	requirePortClosed(t, pg.URL)
}

func TestStartPrivateFixedPort(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()

	parent := reachableTempDir(t)
	port := freeTestPort(t)
	cfg := Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(parent, "data"), Port: port}

	pg := startCluster(t, cfg)
	u, err := url.Parse(pg.URL)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(port), u.Port())
	var one int
	queryOne(t, pg.URL, "SELECT 1", &one)
	require.Equal(t, 1, one)

	// Stopped and started again on the same folder and port: the same URL.
	require.NoError(t, pg.Close(ctx))
	requirePortClosed(t, pg.URL)
	pg2 := startCluster(t, cfg)
	require.Equal(t, pg.URL, pg2.URL)
	queryOne(t, pg2.URL, "SELECT 1", &one)

	// A second cluster cannot take a port that is in use.
	other := cfg
	other.DataDir = filepath.Join(parent, "other")
	_, err = Start(ctx, other)
	require.ErrorContains(t, err, "in use")
	require.NoError(t, pg2.Close(ctx))
}

// TestStartPrivateRemembersPort: with RememberPort, a cluster stopped and started again
// listens on the same port, so a saved URL keeps working; when that port is taken, it
// moves to a free one.
func TestStartPrivateRemembersPort(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()

	parent := reachableTempDir(t)
	cfg := Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(parent, "data"), RememberPort: true}

	pg := startCluster(t, cfg)
	require.NoError(t, pg.Close(ctx))
	requirePortClosed(t, pg.URL)
	pg2 := startCluster(t, cfg)
	require.Equal(t, pg.URL, pg2.URL, "the same port, so the same URL")
	require.NoError(t, pg2.Close(ctx))

	// Someone else holds the port now: the next start takes another.
	u, err := url.Parse(pg.URL)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:"+u.Port())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	pg3 := startCluster(t, cfg)
	u3, err := url.Parse(pg3.URL)
	require.NoError(t, err)
	require.NotEqual(t, u.Port(), u3.Port())
	var one int
	queryOne(t, pg3.URL, "SELECT 1", &one)
	require.Equal(t, 1, one)
	require.NoError(t, pg3.Close(ctx))
}

func TestConfigRejectsBadPort(t *testing.T) {
	t.Parallel()
	for _, port := range []int{-1, 65536} {
		_, err := Start(t.Context(), Config{Env: envOf(nil), DisableDocker: true, Port: port})
		require.ErrorContains(t, err, "port")
	}
}

// freeTestPort returns a loopback port that was free a moment ago.
func freeTestPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestStartPrivateAsksForAPassword: the private cluster uses scram-sha-256, not trust,
// with a generated password kept beside the data folder (mode 0600) and carried by the
// URL; a connection without it is refused. A folder initialised with trust by an older
// oncebox is converted on its next start, its data kept.
func TestStartPrivateAsksForAPassword(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()
	parent := reachableTempDir(t)
	cfg := Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(parent, "data")}

	requireScram := func(pg *Postgres) {
		t.Helper()
		u, err := url.Parse(pg.URL)
		require.NoError(t, err)
		password, ok := u.User.Password()
		require.True(t, ok, "the URL carries the password")
		kept, err := os.ReadFile(cfg.DataDir + ".password")
		require.NoError(t, err)
		require.Equal(t, password, strings.TrimSpace(string(kept)))
		info, err := os.Stat(cfg.DataDir + ".password")
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

		u.User = url.User("postgres")
		_, err = pgx.Connect(ctx, u.String())
		require.ErrorContains(t, err, "password", "a connection without the password is refused")
		u.User = url.UserPassword("postgres", "guess")
		_, err = pgx.Connect(ctx, u.String())
		require.ErrorContains(t, err, "password authentication failed")
		var trust int
		queryOne(t, pg.URL, "SELECT count(*) FROM pg_hba_file_rules WHERE auth_method = 'trust'", &trust)
		require.Zero(t, trust)
	}

	pg := startCluster(t, cfg)
	requireScram(pg)
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, pg.Close(ctx))

	// Make it look like a folder an older oncebox initialised: trust, no password file.
	hba := filepath.Join(cfg.DataDir, "pg_hba.conf")
	rules, err := os.ReadFile(hba)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hba, []byte(strings.ReplaceAll(string(rules), "scram-sha-256", "trust")), 0o600))
	require.NoError(t, os.Remove(cfg.DataDir+".password"))

	pg2 := startCluster(t, cfg)
	requireScram(pg2)
	var v string
	queryOne(t, pg2.URL, "SELECT v FROM kept", &v)
	require.Equal(t, "before", v)
	require.NoError(t, pg2.Close(ctx))

	// And the next start uses the kept password.
	pg3 := startCluster(t, cfg)
	require.Equal(t, pg2.URL[:len(pg2.URL)-len(strings.SplitN(pg2.URL, "@", 2)[1])], pg3.URL[:len(pg3.URL)-len(strings.SplitN(pg3.URL, "@", 2)[1])])
	requireScram(pg3)
}

// TestCrashOfADurableCluster: a private cluster started with Config.Durable runs with
// fsync, synchronous_commit and full_page_writes on; Crash SIGKILLs its postmaster (no
// shutdown checkpoint), and the next Start on the same folder recovers every
// transaction that was reported committed.
func TestCrashOfADurableCluster(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()
	cfg := Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(reachableTempDir(t), "data"), Durable: true}
	pg := startCluster(t, cfg)
	var fsync, syncCommit, fullPages string
	queryOne(t, pg.URL, "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')",
		&fsync, &syncCommit, &fullPages)
	require.Equal(t, []string{"on", "on", "on"}, []string{fsync, syncCommit, fullPages})

	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (n int)")
	require.NoError(t, err)
	for n := range 100 {
		_, err = conn.Exec(ctx, "INSERT INTO kept VALUES ($1)", n)
		require.NoError(t, err)
	}
	require.NoError(t, pg.Crash(ctx))
	_ = conn.Close(ctx)
	requirePortClosed(t, pg.URL)
	require.NoError(t, pg.Close(ctx), "Close after Crash does nothing")

	pg2 := startCluster(t, cfg)
	var rows int
	queryOne(t, pg2.URL, "SELECT count(*) FROM kept", &rows)
	require.Equal(t, 100, rows, "every committed insert survives the crash")
	require.NoError(t, pg2.Close(ctx))
}

// TestStartPrivateOnNetworks: a cluster given Config.Networks listens on each address
// besides 127.0.0.1 and accepts that network's clients with the password, and no
// others; started again without them, it forgets their rules.
func TestStartPrivateOnNetworks(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx := t.Context()
	// 127.0.0.0/8 is this host's: 127.0.0.2 stands for a link's host side, 127.0.0.3
	// for a client in its network, 127.0.0.5 for a client outside it.
	cfg := Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(reachableTempDir(t), "data"),
		Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/31")}}
	pg := startCluster(t, cfg)
	connectFrom := func(url, server, client string) error {
		t.Helper()
		pc, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		pc.Host = server
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(client)}, Timeout: 5 * time.Second}
		pc.DialFunc = dialer.DialContext
		conn, err := pgx.ConnectConfig(ctx, pc)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}
	require.NoError(t, connectFrom(pg.URL, "127.0.0.2", "127.0.0.3"), "a client of the network, on its address")
	require.NoError(t, connectFrom(pg.URL, "127.0.0.1", "127.0.0.1"), "loopback as before")
	require.ErrorContains(t, connectFrom(pg.URL, "127.0.0.2", "127.0.0.5"), "no pg_hba.conf entry", "a client outside the network")
	require.NoError(t, pg.Close(ctx))

	cfg.Networks = nil
	pg2 := startCluster(t, cfg)
	require.Error(t, connectFrom(pg2.URL, "127.0.0.2", "127.0.0.3"), "no longer listening there")
	var rules int
	queryOne(t, pg2.URL, "SELECT count(*) FROM pg_hba_file_rules WHERE address = '127.0.0.2'", &rules)
	require.Zero(t, rules)

	_, err := Start(ctx, Config{Env: envOf(nil), DisableDocker: true, Networks: []netip.Prefix{{}}})
	require.ErrorContains(t, err, "network")
}

// TestCrashWithABackendThatCannotNotice: a backend asleep where it does not check for
// the postmaster's death (here in pclose, waiting for COPY's program; in a failover, on
// a lock the killed WAL sender held) keeps the server's log pipe open. Crash still
// ends, by SIGKILLing the whole process group after a grace, and leaves no process.
func TestCrashWithABackendThatCannotNotice(t *testing.T) {
	t.Parallel()
	requireServerBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := Config{Env: envOf(nil), DisableDocker: true, DataDir: filepath.Join(reachableTempDir(t), "data")}
	pg := startCluster(t, cfg)
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	var backend int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend))
	go func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "COPY (SELECT 1) TO PROGRAM 'sleep 600'") }()
	require.Eventually(t, func() bool {
		out, err := exec.Command("pgrep", "-P", strconv.Itoa(backend)).Output()
		return err == nil && len(out) > 0
	}, 10*time.Second, 50*time.Millisecond, "COPY's program runs")
	pgid, err := syscall.Getpgid(backend)
	require.NoError(t, err)

	t0 := time.Now()
	require.NoError(t, pg.Crash(ctx))
	require.Less(t, time.Since(t0), crashGrace+10*time.Second, "the grace, then the group's SIGKILL")
	require.ErrorIs(t, syscall.Kill(-pgid, 0), syscall.ESRCH, "no process of the server is left")
	requirePortClosed(t, pg.URL)
}
