package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Main parses the flags, runs the harness and returns the exit code.
func Main(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("oncebox-chaos", flag.ContinueOnError)
	var cfg Config
	fs.IntVar(&cfg.Ops, "ops", 2000, "idempotency keys to enqueue")
	fs.IntVar(&cfg.Workers, "workers", 2, "oncebox serve processes (2 or more)")
	fs.DurationVar(&cfg.DurationCap, "duration-cap", 0, "bound on the whole run; ops unsettled at the cap count as lost (default 6m)")
	fs.DurationVar(&cfg.EnqueueFor, "enqueue-for", 0, "how long enqueueing, kills and faults last (default 40s)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the workload, kills and faults (default: the clock)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "use this Postgres instead of a private cluster (the Postgres restart is then skipped)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the serve processes' logs even when the run is green")
	nativeKeys := fs.Bool("webhook-native-keys", true, "run webhooks with --webhook-native-keys against a receiver that deduplicates, and the HTTP MCP upstream with native_keys; false: oncebox's default webhook mode, a share of webhooks to a receiver that does not deduplicate, and an MCP upstream that does not either, settled by lookups")
	fs.BoolVar(&cfg.NoEvents, "no-events", false, "run without vendor events, to compare needs_review with a run that has them")
	fs.StringVar(&cfg.UpgradeFrom, "upgrade-from", "", "a commit (make chaos-upgrade: the one in .ci/previous-release): start on its oncebox, run this tree's migrate in the middle, replace the processes one by one")
	fs.BoolVar(&cfg.Partitions, "partitions", true, "run one serve process in a network namespace and cut its link to Postgres, then to the fake vendors (needs root and ip netns; skipped without them, unless CI is set)")
	fs.DurationVar(&cfg.LongPGCut, "long-pg-cut", 0, "cut the partitioned serve's Postgres link this long (more than 100s) instead of the short partition, and check that Postgres ends its sessions, and their locks, within serve's --pg-dead-session-timeout and a margin")
	fs.StringVar(&cfg.Failover, "failover", "", "sync or async (make chaos-failover): a streaming standby, synchronous or not, promoted after the primary is SIGKILLed in the middle of the run; serve reaches it through a multi-host URL")
	fs.BoolVar(&cfg.HTTP2, "http2", true, "serve the fake Stripe, SendGrid, webhook receivers and CRM over TLS offering HTTP/2, with a late-delivery fault (a request held until the client gives up, then delivered if its connection is still open)")
	cellsMode := fs.Bool("cells", false, "the two-cell run (make chaos-cells): two durable clusters, serve with --cells, SIGKILLs, one cell's Postgres crashed, a tenant moved mid-run; only --seed, --enqueue-for, --duration-cap and --keep apply")
	if err := fs.Parse(args); err != nil {
		return exitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "oncebox-chaos: unexpected arguments %q\n", fs.Args())
		return exitError
	}
	if *cellsMode {
		return runCells(ctx, cfg)
	}
	cfg.WebhookDefaultMode = !*nativeKeys
	if cfg.Failover != "" && cfg.Failover != failoverSync && cfg.Failover != failoverAsync {
		fmt.Fprintf(os.Stderr, "oncebox-chaos: --failover is sync or async, not %q\n", cfg.Failover)
		return exitError
	}
	if cfg.Failover != "" && cfg.DatabaseURL != "" {
		fmt.Fprintln(os.Stderr, "oncebox-chaos: --failover needs the private cluster: leave --database-url out")
		return exitError
	}
	if cfg.LongPGCut != 0 && cfg.LongPGCut <= longCutMin {
		fmt.Fprintf(os.Stderr, "oncebox-chaos: --long-pg-cut must be longer than %s (not %s)\n", longCutMin, cfg.LongPGCut)
		return exitError
	}
	if cfg.Workers < 2 {
		fmt.Fprintln(os.Stderr, "oncebox-chaos: --workers must be 2 or more")
		return exitError
	}
	return Run(ctx, cfg)
}
