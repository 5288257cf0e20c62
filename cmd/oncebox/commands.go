package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/mcpserver"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tools"
)

var (
	logFormat = envOr("ONCEBOX_LOG_FORMAT", "text")
	logLevel  = envOr("ONCEBOX_LOG_LEVEL", "info")
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func extraLog(fs *flag.FlagSet) {
	fs.StringVar(&logFormat, "log-format", logFormat, "log format: text or json (env ONCEBOX_LOG_FORMAT)")
	fs.StringVar(&logLevel, "log-level", logLevel, "log level: debug, info, warn, error (env ONCEBOX_LOG_LEVEL)")
}

func newLogger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", logFormat)
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	logger, err := newLogger()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx)
}

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2, err: err}
	}
	pool, err := openPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := migrations.Migrate(ctx, pool, nil)
	if err != nil {
		return err
	}
	fmt.Printf("migrated: %d River migration(s), %d oncebox migration(s) applied\n", len(res.River), len(res.Oncebox))
	return nil
}

func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, &exitError{code: 2, err: errors.New("set DATABASE_URL (or --database-url) to a Postgres URL")}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	return pool, nil
}

// offline builds a server (not run) for commands that need the outbox and vendors.
func offline(ctx context.Context, fs *flag.FlagSet, args []string) (*server.Server, error) {
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	cfg.Roles = server.Roles{Periodic: true}
	logger, err := newLogger()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return server.New(ctx, cfg, logger)
}

func tenantID(ctx context.Context, srv *server.Server, name string) (int64, error) {
	if name == "" {
		return 0, &exitError{code: 2, err: errors.New("--tenant is required")}
	}
	t, err := srv.Tenants().ByName(ctx, name)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == pgerrcode.UndefinedTable {
		return 0, errors.New("the database has no oncebox tables: run `oncebox migrate` with the same DATABASE_URL first")
	}
	if err != nil {
		return 0, err
	}
	return t.ID, nil
}

func runLookup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lookup", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant name")
	asJSON := fs.Bool("json", false, "print JSON")
	srv, err := offline(ctx, fs, args)
	if err != nil {
		return err
	}
	defer srv.Close()
	if fs.NArg() != 1 {
		return &exitError{code: 2, err: errors.New("usage: oncebox lookup --tenant T KEY")}
	}
	tid, err := tenantID(ctx, srv, *tenantName)
	if err != nil {
		return err
	}
	op, err := srv.Outbox().Get(ctx, tid, fs.Arg(0))
	if err != nil {
		return err
	}
	h, err := srv.Outbox().History(ctx, tid, op.ID)
	if err != nil {
		return err
	}
	return printLookup(os.Stdout, op, h, *asJSON)
}

func printLookup(w io.Writer, op *outbox.Op, h *outbox.History, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"op": op, "fingerprint": op.Fingerprint.String(), "attempts": h.Attempts, "events": h.Events})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "op\t%s\n", op.ID)
	fmt.Fprintf(tw, "key\t%s\n", op.Key)
	fmt.Fprintf(tw, "tool\t%s (vendor %s)\n", op.Tool, op.Vendor)
	fmt.Fprintf(tw, "status\t%s\n", op.Status)
	fmt.Fprintf(tw, "fingerprint\t%s\n", op.Fingerprint)
	fmt.Fprintf(tw, "vendor key\t%s (generation %d)\n", op.VendorKey, op.Generation)
	fmt.Fprintf(tw, "vendor ref\t%s\n", op.VendorRef)
	fmt.Fprintf(tw, "conversation\t%s\n", op.ConversationID)
	fmt.Fprintf(tw, "tool call\t%s\n", op.ToolCallID)
	fmt.Fprintf(tw, "created\t%s\n", op.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "updated\t%s\n", op.UpdatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "expires\t%s\n", op.ExpiresAt.Format(time.RFC3339))
	if len(op.Result) > 0 {
		fmt.Fprintf(tw, "result\t%s\n", op.Result)
	}
	if len(op.Error) > 0 {
		fmt.Fprintf(tw, "error\t%s\n", op.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nattempts (%d):\n", len(h.Attempts))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTARTED\tTOOK\tOUTCOME\tVENDOR REF\tERROR")
	for _, a := range h.Attempts {
		took := "running"
		if a.FinishedAt != nil {
			took = a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.StartedAt.Format(time.RFC3339), took, a.Outcome, a.VendorRef, a.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndecisions (%d):\n", len(h.Events))
	for _, e := range h.Events {
		fmt.Fprintf(w, "  %s  %s  %s -> %s  by %s  %s\n", e.At.Format(time.RFC3339), e.Kind, e.FromStatus, e.ToStatus, e.Actor, e.Detail)
	}
	return nil
}

func runDecide(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant name")
	reason := fs.String("reason", "", "why (recorded in the op's history)")
	actor := fs.String("actor", envOr("USER", "operator"), "who decides")
	srv, err := offline(ctx, fs, args)
	if err != nil {
		return err
	}
	defer srv.Close()
	if fs.NArg() != 1 {
		return &exitError{code: 2, err: fmt.Errorf("usage: oncebox %s --tenant T KEY [--reason R]", verb)}
	}
	tid, err := tenantID(ctx, srv, *tenantName)
	if err != nil {
		return err
	}
	var op *outbox.Op
	if verb == "approve" {
		op, err = srv.Outbox().Approve(ctx, tid, fs.Arg(0), *actor+" (cli)", *reason)
	} else {
		op, err = srv.Outbox().Reject(ctx, tid, fs.Arg(0), *actor+" (cli)", *reason)
	}
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", op.Key, op.Status)
	return nil
}

func runReview(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &exitError{code: 2, err: errors.New("usage: oncebox review list | review resolve --tenant T KEY (see oncebox help)")}
	}
	fs := flag.NewFlagSet("review "+args[0], flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant name")
	succeeded := fs.String("succeeded", "", "resolve as succeeded with this vendor object id")
	failed := fs.Bool("failed", false, "resolve as failed")
	resend := fs.Bool("resend", false, "release for a resend")
	newKey := fs.Bool("new-key", false, "with --resend: use a fresh vendor key (the vendor holds a stored failure under the old one)")
	reason := fs.String("reason", "", "why (required for resolve; recorded in the op's history)")
	actor := fs.String("actor", envOr("USER", "operator"), "who decides")
	srv, err := offline(ctx, fs, args[1:])
	if err != nil {
		return err
	}
	defer srv.Close()
	switch args[0] {
	case "list":
		var tid int64
		if *tenantName != "" {
			if tid, err = tenantID(ctx, srv, *tenantName); err != nil {
				return err
			}
		}
		items, err := reconcile.ListReview(ctx, srv.Pool(), tid)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tKEY\tTOOL\tATTEMPTS\tSINCE\tWHY")
		for _, it := range items {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", it.TenantID, it.Key, it.Tool, it.Attempts, it.UpdatedAt.Format(time.RFC3339), it.LastEvent)
		}
		return tw.Flush()
	case "resolve":
		if fs.NArg() != 1 || *reason == "" {
			return &exitError{code: 2, err: errors.New("usage: oncebox review resolve --tenant T KEY (--succeeded REF | --failed | --resend [--new-key]) --reason R")}
		}
		tid, err := tenantID(ctx, srv, *tenantName)
		if err != nil {
			return err
		}
		who := *actor + " (cli)"
		var op *outbox.Op
		switch {
		case *succeeded != "":
			op, err = reconcile.ResolveSucceeded(ctx, srv.Outbox(), tid, fs.Arg(0), *succeeded, *reason, who)
		case *failed:
			op, err = reconcile.ResolveFailed(ctx, srv.Outbox(), tid, fs.Arg(0), *reason, who)
		case *resend:
			op, err = reconcile.ReleaseForResend(ctx, srv.Outbox(), tid, fs.Arg(0), *reason, who, *newKey)
		default:
			return &exitError{code: 2, err: errors.New("say how: --succeeded REF, --failed or --resend")}
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s\n", op.Key, op.Status)
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown review command %q", args[0])}
}

func runReconcile(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &exitError{code: 2, err: errors.New("usage: oncebox reconcile run | report --since T --until T")}
	}
	fs := flag.NewFlagSet("reconcile "+args[0], flag.ContinueOnError)
	since := fs.String("since", "", "start of the window (RFC 3339 or YYYY-MM-DD)")
	until := fs.String("until", "", "end of the window, exclusive (RFC 3339 or YYYY-MM-DD; default now)")
	tenantName := fs.String("tenant", "", "only this tenant's ops")
	format := fs.String("format", "csv", "csv or json")
	srv, err := offline(ctx, fs, args[1:])
	if err != nil {
		return err
	}
	defer srv.Close()
	switch args[0] {
	case "run":
		st, err := srv.Reconciler().SweepOnce(ctx)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(st)
		fmt.Println(string(b))
		return nil
	case "report":
		s, err := parseTime(*since)
		if err != nil || *since == "" {
			return &exitError{code: 2, err: fmt.Errorf("--since: want RFC 3339 or YYYY-MM-DD: %w", err)}
		}
		u := time.Now()
		if *until != "" {
			if u, err = parseTime(*until); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--until: %w", err)}
			}
		}
		var tid int64
		if *tenantName != "" {
			if tid, err = tenantID(ctx, srv, *tenantName); err != nil {
				return err
			}
		}
		rep, err := reconcile.BuildReport(ctx, srv.Pool(), reconcile.ReportParams{Since: s, Until: u, TenantID: tid, Listers: srv.Listers(),
			Unlistable: []string{tools.VendorWebhook}, Events: srv.Events()})
		if err != nil {
			return err
		}
		switch *format {
		case "csv":
			err = rep.WriteCSV(os.Stdout)
		case "json":
			err = rep.WriteJSON(os.Stdout)
		default:
			return &exitError{code: 2, err: fmt.Errorf("--format %q: want csv or json", *format)}
		}
		if err != nil {
			return err
		}
		if !rep.Clean() {
			unchecked := 0
			for _, n := range rep.Unchecked {
				unchecked += n
			}
			return &exitError{code: 1, err: fmt.Errorf("%d line(s) do not match, of which %d op(s) could not be checked (their vendor is not configured in this process)",
				rep.Problems, unchecked)}
		}
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown reconcile command %q", args[0])}
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", s)
}

// errNoVendor is what `oncebox mcp` says when no vendor is configured.
var errNoVendor = errors.New("no tool is enabled: set STRIPE_API_KEY (payments, refunds), SENDGRID_API_KEY (mail) " +
	"or ONCEBOX_WEBHOOK_TARGETS (webhooks), as for oncebox serve")

func runMCP(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant whose ops the tools create")
	conversation := fs.String("conversation", "", "conversation of calls that name none in _meta (default: none; identical calls are then one op within the tool's --mcp-dedupe-window, across restarts)")
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// Over stdio this process only enqueues; `oncebox serve` dispatches.
	cfg.Roles = server.Roles{API: true}
	if cfg.StripeAPIKey == "" && cfg.SendGridAPIKey == "" && len(cfg.WebhookTargets) == 0 {
		return &exitError{code: 2, err: errNoVendor}
	}
	logger, err := newLogger()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	tid, err := tenantID(ctx, srv, *tenantName)
	if err != nil {
		return err
	}
	m, err := mcpserver.New(mcpserver.Config{Outbox: srv.Outbox(), Tenants: srv.Tenants(), Logger: logger, Wait: cfg.MCPWait,
		Conversation: *conversation, DedupeWindows: cfg.MCPDedupeWindows})
	if errors.Is(err, mcpserver.ErrNoTools) {
		return &exitError{code: 2, err: errNoVendor}
	}
	if err != nil {
		return err
	}
	return m.RunStdio(ctx, tid)
}

func runHealthcheck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "health endpoint")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", *url, resp.Status)
	}
	return nil
}
