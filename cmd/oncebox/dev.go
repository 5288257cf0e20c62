package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// runDev runs everything with zero configuration: a Postgres (--database-url or
// DATABASE_URL as is, else a private cluster from the server binaries on the machine,
// else Docker in a build with -tags devcontainer), migrations, in-process fake vendors for those without real keys, a
// demo tenant, and the server. Ctrl-C stops everything it started, Postgres included.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	tenantName := fs.String("tenant", "demo", "name of the demo tenant")
	linkTTL := fs.Duration("console-link-ttl", 5*time.Minute, "how long the printed one-time console sign-in link stays valid")
	dataDir := fs.String("data-dir", os.Getenv("ONCEBOX_DEV_DATA_DIR"), "the private cluster's data folder (env ONCEBOX_DEV_DATA_DIR; default: a folder of your own under your cache directory, or as root under the temporary directory, keyed by HOME)")
	cfg, log, err := parseConfig(fs, args)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	logger, err := log.logger()
	if err != nil {
		return err
	}
	// The port first: a dev that cannot have it (another dev holds it) stops before it
	// migrates, revokes or mints anything.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (is another oncebox dev or serve running there? set --addr): %w", cfg.Addr, err)
	}
	defer func() { _ = ln.Close() }()
	cfg.Listener = ln

	pg, err := devPostgres(ctx, fs, cfg.DatabaseURL, *dataDir, logger)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := pg.Close(stopCtx); err != nil {
			logger.Warn("stop Postgres", slog.Any("error", err))
		}
	}()
	logger.Info("postgres ready", slog.String("source", pg.Source))
	cfg.DatabaseURL = pg.URL
	tokens, err := devDatabase(ctx, pg.URL, *tenantName, logger)
	if err != nil {
		return err
	}

	sealKeyPath, err := devSealKey(&cfg, pg)
	if err != nil {
		return err
	}
	fakes := &devFakes{}
	defer fakes.stop()
	if err := fakes.start(&cfg, logger); err != nil {
		return err
	}
	fakesNote, save, err := fakes.keep(pg)
	if err != nil {
		return err
	}
	defer save(logger)

	banner := devBanner{pg: pg, fakes: fakes.list, fakesNote: fakesNote, tenant: *tenantName, tokens: tokens, linkTTL: *linkTTL,
		cliEnv: fakes.env(cfg), sealKeyPath: sealKeyPath}
	return serveDev(ctx, cfg, logger, fakes, banner)
}

// serveDev runs the dev server until ctx ends: it starts the fakes' events once the
// server listens, and prints the banner.
func serveDev(ctx context.Context, cfg server.Config, logger *slog.Logger, fakes *devFakes, banner devBanner) error {
	stopTracing, err := setupTracing(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	addr, err := srv.Listen()
	if err != nil {
		return err
	}
	base := "http://" + addr.String()
	for _, start := range fakes.postEvents {
		if err := start(base); err != nil {
			return err
		}
	}
	link, err := console.SignInLink(ctx, srv.Pool(), srv.Tenants(), banner.tokens.approver, banner.linkTTL)
	if err != nil {
		return err
	}
	banner.base, banner.link = base, link
	if err := banner.print(); err != nil {
		return err
	}

	if cfg.ToolsFile != "" || cfg.TenantCatalogs != "" {
		stop := reloadOnSIGHUP(ctx, srv)
		defer stop()
	}
	err = srv.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// devDatabase migrates the dev database at url and returns the demo tenant's tokens
// (devTokens).
func devDatabase(ctx context.Context, url, tenantName string, logger *slog.Logger) (devAccess, error) {
	pool, err := openPool(ctx, url)
	if err != nil {
		return devAccess{}, err
	}
	defer pool.Close()
	if _, err := migrations.Migrate(ctx, pool, &migrations.MigrateOpts{Logger: logger}); err != nil {
		return devAccess{}, err
	}
	access, err := devTokens(ctx, tenant.NewStore(pool), tenantName)
	if err != nil {
		return access, err
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&access.earlierOps); err != nil {
		return access, fmt.Errorf("count the ops of earlier runs: %w", err)
	}
	return access, nil
}

// devSealKey gives a dev run without a seal key the one kept in dev's folder
// (devFile), made on the first run (mode 0600) and read on the next ones: ops left
// pending by an earlier run with redacted args can still be sent, and an `oncebox mcp`
// given the printed exports seals with the same key. It returns the file's path, or ""
// when cfg has a seal key of its own.
func devSealKey(cfg *server.Config, pg *localpg.Postgres) (string, error) {
	if cfg.SealKey != "" {
		return "", nil
	}
	path, err := devFile(pg, "sealkey")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var k [32]byte
		_, _ = rand.Read(k[:])
		b = []byte(base64.StdEncoding.EncodeToString(k[:]) + "\n")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("keep dev's seal key in %s: %w", path, err)
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("keep dev's seal key in %s: %w", path, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("read dev's seal key (delete %s to make a new one): %w", path, err)
	}
	cfg.SealKey = strings.TrimSpace(string(b))
	return path, nil
}

// devBanner is what a dev run prints once its server listens.
type devBanner struct {
	// base is the server's URL.
	base string
	pg   *localpg.Postgres
	// fakes are the fake vendors started, as name, URL pairs; fakesNote says where
	// they keep their objects.
	fakes     []string
	fakesNote string
	tenant    string
	tokens    devAccess
	// link is the one-time console sign-in link, valid linkTTL.
	link    string
	linkTTL time.Duration
	// cliEnv is what the CLI needs besides DATABASE_URL to reach the fakes, as
	// variable, value pairs (devFakes.env); sealKeyPath is the file of dev's own seal
	// key, "" when the seal key was given.
	cliEnv      []string
	sealKeyPath string
}

// print prints the banner on stdout.
func (b devBanner) print() error {
	// A key of its own per run: the private cluster keeps the ops of earlier runs, and
	// the printed curl must record a new op (202) the first time it is run.
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	demoKey := "order-1001-" + hex.EncodeToString(suffix[:])
	exportURL, passNote, err := printableURL(b.pg)
	if err != nil {
		return err
	}
	base, token := b.base, b.tokens.agent
	fmt.Fprintf(os.Stdout, `
oncebox dev is running.

  API        %s   (OpenAPI: %s/openapi.json, MCP: %s/mcp, metrics: %s/metrics)
  Postgres   %s (%s)
%s%s%s  tenant     %s
  token      %s   (agent; the demo tokens of earlier dev runs are revoked)
  console    %s%s   (one-time sign-in link, valid %s; or sign in with the approver token %s)

Enqueue an op (run it twice: the second answer is a replay, and nothing is charged twice):

  curl -sS -X POST '%s/v1/ops?wait=5s' \
    -H 'Authorization: Bearer %s' \
    -H 'Idempotency-Key: %s' \
    -H 'Content-Type: application/json' \
    -d '{"tool":"stripe.payment_intent","args":{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}'

Point the CLI (oncebox lookup, review, reconcile report, mcp --tenant %s) at this database%s
and its fake vendors (again after a restart: the fakes' ports change):

%s
Press Ctrl-C to stop everything this command started.
`, base, base, base, base, b.pg.Source, redactURL(b.pg.URL), b.reuseNote(), fakeLines(b.fakes), b.fakesNote, b.tenant, token, base, b.link, b.linkTTL, b.tokens.approver, base, token, demoKey, b.tenant, passNote, b.exports(exportURL))
	return nil
}

// reuseNote says, when the database holds ops of earlier runs, that it is reused: their
// keys are taken, and the finance report counts their ops too.
func (b devBanner) reuseNote() string {
	if b.tokens.earlierOps == 0 {
		return ""
	}
	where := "--data-dir DIR (or ONCEBOX_DEV_DATA_DIR) names a fresh one"
	switch {
	case strings.HasPrefix(b.pg.Source, "env:") || strings.HasPrefix(b.pg.Source, "flag:"):
		where = "the database you named; point DATABASE_URL at an empty one for a fresh start"
	case b.pg.DataDir != "":
		where = "it is " + b.pg.DataDir + "; --data-dir DIR (or ONCEBOX_DEV_DATA_DIR) names a fresh one"
	}
	return fmt.Sprintf("  reused     this database holds %d op(s) of earlier runs: pick new keys, and reports count those ops too (%s)\n",
		b.tokens.earlierOps, where)
}

// exports is the banner's one export command: the database URL (databaseURL, without
// its password), the fakes' settings, and the seal key read from its file.
func (b devBanner) exports(databaseURL string) string {
	vars := append([]string{"DATABASE_URL", shellQuote(databaseURL)}, quoteValues(b.cliEnv)...)
	if b.sealKeyPath != "" {
		vars = append(vars, settingEnv("seal-key"), `"$(cat `+shellQuote(b.sealKeyPath)+`)"`)
	}
	lines := make([]string, 0, len(vars)/2)
	for i := 0; i+1 < len(vars); i += 2 {
		lines = append(lines, vars[i]+"="+vars[i+1])
	}
	return "  export " + strings.Join(lines, " \\\n    ") + "\n"
}

// quoteValues quotes the values of variable, value pairs for a shell.
func quoteValues(pairs []string) []string {
	out := slices.Clone(pairs)
	for i := 1; i < len(out); i += 2 {
		out[i] = shellQuote(out[i])
	}
	return out
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// settingEnv is the environment variable of the setting whose flag is name.
func settingEnv(name string) string {
	for _, s := range settings() {
		if s.flag == name {
			return s.env
		}
	}
	panic("no setting --" + name)
}

// devPostgres returns the Postgres of a dev run: the URL given with --database-url or
// DATABASE_URL, used as is, else one found or started by localpg.
func devPostgres(ctx context.Context, fs *flag.FlagSet, databaseURL, dataDir string, logger *slog.Logger) (*localpg.Postgres, error) {
	if strings.TrimSpace(databaseURL) != "" {
		source := "env:DATABASE_URL"
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "database-url" {
				source = "flag:--database-url"
			}
		})
		return &localpg.Postgres{URL: databaseURL, Source: source}, nil
	}
	// DATABASE_URL, when set, is databaseURL already: localpg need not look at it.
	// The port is remembered beside the cluster, so that an exported DATABASE_URL or a
	// saved MCP client configuration keeps working across restarts.
	return localpg.Start(ctx, localpg.Config{Logger: logger, EnvVars: []string{}, Container: containerFallback(), RememberPort: true, DataDir: dataDir})
}

// serveFake serves a fake vendor on a free loopback port.
func serveFake(h http.Handler) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen for a fake vendor: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	}, nil
}

// printableURL returns the database URL dev prints for the CLI, without its password:
// a password goes to a pgpass file (mode 0600) the URL names with passfile=, beside
// the private cluster's data folder, else in the user's cache folder. note says where.
func printableURL(pg *localpg.Postgres) (printable, note string, err error) {
	u, err := url.Parse(pg.URL)
	if err != nil {
		return "", "", fmt.Errorf("database URL: %w", err)
	}
	password, ok := u.User.Password()
	if !ok {
		return pg.URL, "", nil
	}
	path, err := devFile(pg, "pgpass")
	if err != nil {
		return "", "", err
	}
	esc := strings.NewReplacer(`\`, `\\`, ":", `\:`)
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	line := strings.Join([]string{esc.Replace(u.Hostname()), port, "*", esc.Replace(u.User.Username()), esc.Replace(password)}, ":") + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return "", "", fmt.Errorf("write the database password to %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return "", "", fmt.Errorf("write the database password to %s: %w", path, err)
	}
	u.User = url.User(u.User.Username())
	q := u.Query()
	q.Set("passfile", path)
	u.RawQuery = q.Encode()
	return u.String(), " (its password is in " + path + ", mode 0600, which the URL names)", nil
}

// devFile is where dev keeps its file ext for the database pg: beside the private
// cluster's data folder, else in the user's cache folder, named after the database's
// host, port and name.
func devFile(pg *localpg.Postgres, ext string) (string, error) {
	if pg.DataDir != "" {
		return pg.DataDir + "." + ext, nil
	}
	u, err := url.Parse(pg.URL)
	if err != nil {
		return "", fmt.Errorf("database URL: %w", err)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "oncebox")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make a folder for dev's files: %w", err)
	}
	name := "dev-" + u.Hostname() + "-" + u.Port()
	if db := strings.Trim(u.Path, "/"); db != "" {
		name += "-" + url.PathEscape(db)
	}
	return filepath.Join(dir, name+"."+ext), nil
}

// redactURL drops a password from a database URL for printing.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// devAccess is the demo tenant's tokens for one dev run.
type devAccess struct {
	agent, approver string
	// earlierOps counts the ops earlier runs left in the database (devDatabase).
	earlierOps int
}

// devTokens makes sure the demo tenant exists, revokes the demo tokens earlier dev runs
// minted (each start would otherwise add two more; a token made with `oncebox tenant
// token create` is left alone), and mints an agent token for the printed curl and MCP
// clients and an approver token for the console.
func devTokens(ctx context.Context, store *tenant.Store, name string) (devAccess, error) {
	var a devAccess
	_, first, err := store.Ensure(ctx, name)
	if err != nil {
		return a, err
	}
	if first != "" {
		// The tenant's first token, made with it: dev prints its own instead.
		if err := store.RevokeToken(ctx, first); err != nil {
			return a, err
		}
	}
	if _, err := store.RevokeMinted(ctx, name, tenant.MinterDev); err != nil {
		return a, err
	}
	if a.agent, err = store.NewMintedToken(ctx, name, tenant.RoleAgent, tenant.MinterDev); err != nil {
		return a, err
	}
	a.approver, err = store.NewMintedToken(ctx, name, tenant.RoleApprover, tenant.MinterDev)
	return a, err
}

// fakeLines prints one banner line per fake vendor, given as name, URL pairs.
func fakeLines(fakes []string) string {
	if len(fakes) == 0 {
		return "  fakes      none: every vendor has real credentials\n"
	}
	var b strings.Builder
	for i := 0; i+1 < len(fakes); i += 2 {
		fmt.Fprintf(&b, "  fake       %-16s %s\n", fakes[i], fakes[i+1])
	}
	return b.String()
}
