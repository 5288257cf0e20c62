package localpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned by Start when no source of Postgres is available.
// Its message is one sentence telling the user what to install or set.
var ErrNoPostgres = errors.New("no Postgres found: set DATABASE_URL, install the PostgreSQL server (postgresql package), or start Docker")

// Config tells Start where it may look for a Postgres.
type Config struct {
	// Env looks up environment variables (the URL variables, PATH and
	// DOCKER_HOST).
	//
	// Defaults to os.LookupEnv.
	Env func(string) (string, bool)

	// EnvVars are the variables tried in order; the first one set to a
	// non-empty value wins. Tests use []string{"TEST_DATABASE_URL",
	// "DATABASE_URL"}.
	//
	// Defaults to []string{"DATABASE_URL"}.
	EnvVars []string

	// DataDir is the data folder of the private cluster. It is created and
	// initialised when empty, reused when it already holds a cluster, and
	// locked for as long as the cluster runs. When the process runs as root,
	// every folder above it must be traversable by the unprivileged user.
	//
	// Defaults to a free slot under the user's cache directory
	// (<cache>/oncebox/localpg/pg<major>/slot-N), or, as root, under
	// os.TempDir()/oncebox-localpg-<user>/home-<hash of HOME>/pg<major>/slot-N, where
	// <user> is the unprivileged user the server runs as: each HOME has clusters of its
	// own.
	DataDir string

	// Database is the database created in a private cluster or a container
	// and named in the returned URL.
	//
	// Defaults to "oncebox".
	Database string

	// Logger receives progress messages.
	//
	// Defaults to a logger that discards everything.
	Logger *slog.Logger

	// Port is the loopback port the private cluster listens on. A fixed port
	// lets a caller stop the cluster and start it again on the same DataDir
	// without the URL changing, so clients only have to reconnect. Start fails
	// when the port is taken.
	//
	// Defaults to 0: a free port chosen at each start.
	Port int

	// RememberPort, with Port 0, keeps the port of the private cluster beside its data
	// folder (<folder>.port) and listens on it again at the next start when it is free,
	// so that a saved DATABASE_URL keeps working across restarts; a taken port is
	// replaced by a free one (and remembered in turn).
	RememberPort bool

	// Durable runs the private cluster with fsync, synchronous_commit and
	// full_page_writes on, so that a crash (Postgres.Crash, a SIGKILL of the
	// postmaster) loses no committed transaction: the chaos harness and the
	// durability tests use it. Off, the default, keeps the fast settings of the unit
	// tests and `oncebox dev` (all three off), under which a crash of the machine or
	// the postmaster may lose transactions that were reported committed.
	Durable bool

	// Networks are further host addresses of the private cluster, each with the prefix
	// of its network (10.231.7.1/30): it listens on each address besides 127.0.0.1 and
	// accepts that network's clients, with the password as on loopback. The chaos
	// harness gives it the host side of a network namespace's link, so that a serve
	// process in the namespace reaches Postgres over a link it can cut. Every address
	// must be assigned to an interface of this host when the cluster starts.
	//
	// Defaults to none: loopback only.
	Networks []netip.Prefix

	// StandbyOf, a private cluster's URL (Postgres.URL of a cluster started with
	// Durable or not), makes this private cluster a streaming standby of it: an empty
	// DataDir is filled by pg_basebackup -R from that primary instead of initdb, and
	// the server runs as a hot standby (read-only) until Postgres.Promote. The
	// superuser's password is the primary's. The primary must allow replication
	// connections from 127.0.0.1 (initdb's pg_hba.conf does) and have a WAL sender
	// free (max_wal_senders, 10 by default). Synchronous replication is the primary's
	// setting (synchronous_standby_names), not the standby's.
	//
	// Defaults to "": a cluster of its own.
	StandbyOf string

	// DisablePrivate skips the private cluster.
	DisablePrivate bool

	// DisableDocker skips the container fallback.
	DisableDocker bool

	// Container starts a Postgres container when a Docker engine answers
	// (devkit/pgcontainer.Start). When nil, a machine whose only source is
	// Docker gets an error that says how to build with the fallback; it still
	// satisfies errors.Is(err, ErrNoPostgres).
	Container ContainerFunc
}

func (c Config) withDefaults() Config {
	if c.Env == nil {
		c.Env = os.LookupEnv
	}
	if c.EnvVars == nil {
		c.EnvVars = []string{"DATABASE_URL"}
	}
	if c.Database == "" {
		c.Database = "oncebox"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if strings.ContainsRune(c.Database, 0) || len(c.Database) > 63 {
		return fmt.Errorf("database name %q is not valid: use at most 63 bytes and no NUL byte", c.Database)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("port %d is not valid: use 1 to 65535, or 0 for a free port", c.Port)
	}
	for _, n := range c.Networks {
		if !n.IsValid() || !n.Addr().Is4() || n.Addr().IsUnspecified() {
			return fmt.Errorf("network %s is not valid: give an IPv4 address of this host with its prefix, such as 10.231.7.1/30", n)
		}
	}
	return nil
}

// Postgres is a running Postgres found or started by Start.
type Postgres struct {
	// URL is a pgx connection string naming an existing database, such as
	// postgres://postgres@127.0.0.1:41234/oncebox?sslmode=disable.
	URL string

	// Source says where the Postgres came from: "env:DATABASE_URL",
	// "private:/usr/lib/postgresql/15/bin" or "testcontainers".
	Source string

	// DataDir is the private cluster's data folder ("" for any other source): files
	// that belong with the cluster's data, such as the fake vendors' objects of
	// `oncebox dev`, are kept beside it.
	DataDir string

	closeOnce sync.Once
	closeFunc func(ctx context.Context) error
	closeErr  error
	crashFunc func(ctx context.Context) error
}

// Promote ends a standby's recovery (pg_promote, waiting up to a minute): the server
// then accepts writes on a new timeline. It fails when the server is not a standby.
func (p *Postgres) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		return fmt.Errorf("localpg: connect to promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var done bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&done); err != nil {
		return fmt.Errorf("localpg: promote: %w", err)
	}
	if !done {
		return errors.New("localpg: the standby was not promoted within 60 s")
	}
	return nil
}

// Crash SIGKILLs the private cluster's postmaster, as a crash would: no shutdown
// checkpoint, so the next Start on the same DataDir recovers from the WAL. It waits
// until the server's processes are gone and releases the data folder; Close then does
// nothing. It fails for any other source.
func (p *Postgres) Crash(ctx context.Context) error {
	if p.crashFunc == nil {
		return errors.New("localpg: only a private cluster can be crashed")
	}
	err := errors.New("localpg: already stopped")
	p.closeOnce.Do(func() { err = p.crashFunc(ctx) })
	return err
}

// Close stops what Start started: the private postmaster (fast shutdown) or
// the container. It does nothing for a Postgres taken from the environment.
// Calling Close more than once returns the first call's result.
func (p *Postgres) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		if p.closeFunc != nil {
			p.closeErr = p.closeFunc(ctx)
		}
	})
	return p.closeErr
}

// Start returns a Postgres from the first source that provides one: an
// environment variable, a private cluster, or a testcontainers container. It
// returns ErrNoPostgres when none is available. The caller must call Close.
func Start(ctx context.Context, cfg Config) (*Postgres, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}

	if name, url, ok := cfg.envURL(); ok {
		if _, err := pgx.ParseConfig(url); err != nil {
			return nil, fmt.Errorf("%s is not a usable Postgres URL: %w", name, err)
		}
		cfg.Logger.InfoContext(ctx, "using Postgres from the environment", slog.String("variable", name))
		return &Postgres{URL: url, Source: "env:" + name}, nil
	}

	var privateErr error
	if !cfg.DisablePrivate {
		if binDir, ok := findBinDir(cfg.Env); ok {
			pg, err := startPrivate(ctx, cfg, binDir)
			if err == nil {
				return pg, nil
			}
			privateErr = fmt.Errorf("start a private Postgres from %s: %w", binDir, err)
			cfg.Logger.WarnContext(ctx, "private Postgres failed", slog.String("error", privateErr.Error()))
		} else {
			cfg.Logger.DebugContext(ctx, "no PostgreSQL server binaries found")
		}
	}

	if !cfg.DisableDocker && dockerAnswers(ctx, cfg.Env) {
		if cfg.Container == nil {
			return nil, errors.Join(privateErr, errNoContainer{})
		}
		pg, err := startContainer(ctx, cfg)
		if err == nil {
			return pg, nil
		}
		return nil, errors.Join(privateErr, fmt.Errorf("start a Postgres container: %w", err))
	}

	if privateErr != nil {
		return nil, privateErr
	}
	return nil, ErrNoPostgres
}

// Probe reports the source Start would use, without starting anything: "env:NAME",
// "private:<bin dir>" or "testcontainers", as Postgres.Source spells them. It returns
// ErrNoPostgres when Start would find none. Probe does not check that the source
// works: the URL may not answer, or initdb may fail (Start then falls back to Docker).
func Probe(ctx context.Context, cfg Config) (string, error) {
	cfg = cfg.withDefaults()
	if name, _, ok := cfg.envURL(); ok {
		return "env:" + name, nil
	}
	if !cfg.DisablePrivate {
		if binDir, ok := findBinDir(cfg.Env); ok {
			return "private:" + binDir, nil
		}
	}
	if !cfg.DisableDocker && dockerAnswers(ctx, cfg.Env) {
		if cfg.Container == nil {
			return "", errNoContainer{}
		}
		return "testcontainers", nil
	}
	return "", ErrNoPostgres
}

// envURL returns the first variable of EnvVars set to a non-blank value.
func (c Config) envURL() (name, url string, ok bool) {
	for _, name := range c.EnvVars {
		if url, ok := c.Env(name); ok && strings.TrimSpace(url) != "" {
			return name, url, true
		}
	}
	return "", "", false
}
