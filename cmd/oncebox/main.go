// Command oncebox is the one oncebox binary: the server, its migrations, a zero-config
// dev mode, and the tools operators, support and finance use. Run `oncebox help`.
package main

import (
	"context"
	"errors"
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

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// Unwrap is the error carried.
func (e *exitError) Unwrap() error { return e.err }

// Main runs one oncebox command and returns the process exit code.
func Main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	args = hoistGlobals(args)
	if len(args) == 0 {
		usage()
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = runServe(ctx, rest)
	case "dev":
		err = runDev(ctx, rest)
	case "migrate":
		err = runMigrate(ctx, rest)
	case "cell":
		err = runCell(ctx, rest)
	case "tenant":
		err = runTenant(ctx, rest)
	case "policy":
		err = runPolicy(ctx, rest)
	case "lookup":
		err = runLookup(ctx, rest)
	case "approve", "reject":
		err = runDecide(ctx, cmd, rest)
	case "review":
		err = runReview(ctx, rest)
	case "reconcile":
		err = runReconcile(ctx, rest)
	case "audit":
		err = runAudit(ctx, rest)
	case "mcp":
		err = runMCP(ctx, rest)
	case "bench":
		err = runBench(ctx, rest)
	case "healthcheck":
		err = runHealthcheck(ctx, rest)
	case "config":
		err = runConfig(ctx, rest)
	case "tools":
		err = runTools(ctx, rest)
	case "version", "--version":
		err = runVersion(ctx, rest)
	case "help", "-h", "--help":
		usage()
		return 0
	default:
		fmt.Fprintf(os.Stderr, "oncebox: unknown command %q\n\n", cmd)
		usage()
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		// --help printed the subcommand's flags: asking for them is no error.
		return 0
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.err != nil {
				fmt.Fprintln(os.Stderr, "oncebox:", ee.err)
			}
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "oncebox:", err)
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprint(os.Stderr, `oncebox makes side effects requested by LLM agents happen once.

Usage: oncebox <command> [flags]

  dev                          run everything with zero configuration: a Postgres (--database-url or
                               DATABASE_URL, else a private cluster, else Docker in a build with
                               -tags devcontainer: make dev), fake Stripe and SendGrid, a demo tenant
  serve                        run the API, the workers and the periodic jobs (see --roles)
  migrate [--wait]             apply oncebox's and River's migrations (safe to run twice, or at once); a
                               contract migration waits while an older release runs (exit 3, or --wait)
  tenant create NAME [--cell C] create a tenant (in cell C: with --cells) and print its agent API token
  tenant move NAME --to CELL [--dry-run]   move a tenant to another cell, losing and doubling nothing
  cell add NAME --cell-url URL register a cell (an empty Postgres database, migrated here)
  cell list                    the installation's cells
  tenant token create [--role agent|approver|admin|operator] [--person P] NAME
                               add a token to a tenant and print it (shown once; --format json)
  tenant token list [NAME]     list tokens: id, prefix, role, revoked (--format json)
  tenant token revoke TOKEN    revoke a token (the token or its listed prefix)
  tenant list                  list tenants and their tokens' prefixes and roles
  tenant policy list NAME      the approval rule in force per tool: mode, thresholds, approvers, source
  tenant policy set NAME TOOL --mode never|always|above [--above N|cur=N ...] [--approvers 2]
  tenant policy clear NAME TOOL
                               the tenant's own approval rules, over the installation's (policy)
  tenant budget set --tenant T NAME --window 24h [--count N] [--amount usd=N ...] [--tool X]
      [--scope tenant|token|conversation] [--conversations N] [--on-exceed approval|refuse]
  tenant budget list --tenant T   the budgets in force: used, limit and left in the current window
  tenant budget delete --tenant T NAME
                               the tenant's own budgets, over the installation's by name (policy)
  tenant adopt --tenant T VENDOR ID [ID ...]
                               objects made outside oncebox (stripe pi_…) the tenant's ops may act on
  tenant adopt --list [--tenant T]
                               the objects adopted (--format json)
  tenant vendor set --tenant T stripe (--account acct_… | --key-stdin) [--shared]
  tenant vendor set --tenant T sendgrid|stripe-events --key-stdin
                               the tenant's own vendor account or key (read from stdin, stored sealed)
  tenant vendor list [--tenant T]
                               the tenants' vendor settings and claims, never a secret (--format json)
  tenant vendor delete --tenant T VENDOR
                               back to the installation's account from the tenant's next op
  tenant vendor own --tenant T stripe
  tenant vendor disown --tenant T stripe
                               the only tenant owns the objects in the installation's account without
                               adoption (recorded with who and when; refused when other tenants exist)
  policy show [--format json]  the installation's stored approval rules and budgets, which every
                               process reads (serve's --approval-policy, --refund-approval-above and
                               --budgets only seed what is not stored)
  policy set TOOL --mode never|always|above [--above N|cur=N ...] [--approvers 2]
  policy clear TOOL
  policy budget set NAME --window 24h [--count N] [--amount usd=N ...] [--tool X] ...
  policy budget delete NAME    the installation's defaults; a tenant's own override them
  lookup --tenant T TERM       everything about the op a key, op id or vendor ref (pi_…, ch_…, re_…, a
                               SendGrid message id) names: amount, attempts, decisions, timeline, the
                               payment and every refund of it; a conversation's ops
  approve|reject --tenant T --token TOKEN KEY [--reason R]
  review list [--tenant T]     ops waiting for a person: in needs_review, and awaiting approval
  review resolve --tenant T KEY (--succeeded REF | --failed | --resend [--new-key]) --reason R
  reconcile run                one reconciler sweep now
  reconcile report --since T --until T [--tenant T] [--format csv|json]
                               finance report; exit status 1 when anything does not match or
                               cannot be checked
  audit verify --tenant T [--public-key HEX]
                               recompute a tenant's audit chain and checkpoints; exit status 1
                               naming the first entry that does not match (docs/audit.md)
  audit export --tenant T [--since T] [--until T] [--format jsonl|csv]
                               a tenant's audit log, which outlives the ops' purge
  mcp --tenant T [--conversation C]
                               serve the MCP tools over stdio
  bench                        benchmarks against River in the same run (docs/performance.md)
  healthcheck [--url U]        exit 0 when the server answers /healthz
  config                       list every flag and environment variable
  version [--format json]      the release, the commit it was built from, the highest migration it knows
  tools check NAME --args JSON [--tools-file F]
                               the retry scenarios of a catalog tool against its target (sends real
                               requests: use a test environment); verdicts on native_keys and lookup_path

Every command takes the global flags --database-url (env DATABASE_URL), --log-format and
--log-level, before or after its arguments; serve and dev take every flag listed by 'oncebox
config', and the other commands those of them they use ('oncebox COMMAND --help').
`)
}
