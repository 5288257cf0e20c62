package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/tenant"
)

const auditUsage = "usage: oncebox audit verify --tenant T [--public-key HEX] | audit export --tenant T [--since T] [--until T] [--tool NAME] [--person P] [--outcome STATUS] [--min-amount N] [--max-amount N] [--format jsonl|csv]"

// runAudit is `oncebox audit verify` (recompute a tenant's chain and checkpoints; exit
// status 1 naming the first entry that does not match) and `oncebox audit export`.
func runAudit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "the tenant (required)")
	since := fs.String("since", "", "export: start of the window (RFC 3339 or YYYY-MM-DD; default: all)")
	until := fs.String("until", "", "export: end of the window, not included (default: now)")
	format := fs.String("format", "jsonl", "export: jsonl or csv")
	tool := fs.String("tool", "", "export: only the ops of this tool")
	person := fs.String("person", "", "export: only the ops this person asked for or decided on")
	outcome := fs.String("outcome", "", "export: only the ops whose last status in the window is this one (succeeded, failed, needs_review, ...)")
	minAmount := fs.String("min-amount", "", "export: only the ops whose call names an amount (minor units) at least this")
	maxAmount := fs.String("max-amount", "", "export: only the ops whose call names an amount (minor units) at most this")
	publicKey := fs.String("public-key", "", "verify: the checkpoints' ed25519 public key, hex (default: the key stored with each checkpoint)")
	cfg, _, err := parseConfigFor(fs, args, showOnly(cellSettings))
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := inTenantCell(ctx, &cfg, *tenantName); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) != 1 || *tenantName == "" {
		return &exitError{code: 2, err: errors.New(auditUsage)}
	}
	pool, err := openMigratedPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	t, err := tenant.NewStore(pool).ByName(ctx, *tenantName)
	if err != nil {
		return err
	}
	switch rest[0] {
	case "verify":
		var key ed25519.PublicKey
		if *publicKey != "" {
			if key, err = hex.DecodeString(*publicKey); err != nil || len(key) != ed25519.PublicKeySize {
				return &exitError{code: 2, err: errors.New("--public-key: want the 32-byte ed25519 public key in hex")}
			}
		}
		r, err := audit.Verify(ctx, pool, t.ID, key)
		if err != nil {
			return err
		}
		return printVerify(r)
	case "export":
		p := audit.ExportParams{TenantID: t.ID, Tool: *tool, Person: *person, Outcome: *outcome}
		if p.MinAmount, err = optionalAmount(*minAmount); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--min-amount: %w", err)}
		}
		if p.MaxAmount, err = optionalAmount(*maxAmount); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--max-amount: %w", err)}
		}
		if p.Since, err = optionalTime(*since); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--since: want RFC 3339 or YYYY-MM-DD: %w", err)}
		}
		if p.Until, err = optionalTime(*until); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--until: want RFC 3339 or YYYY-MM-DD: %w", err)}
		}
		return exportAudit(ctx, pool, p, *format)
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown audit command %q (%s)", rest[0], auditUsage)}
}

func printVerify(r *audit.Report) error {
	fmt.Printf("%d entries sealed, %d not sealed yet; %d checkpoints (%d unsigned)\n", r.Sealed, r.Unsealed, r.Checkpoints, r.Unsigned)
	if r.Mismatch != nil {
		return fmt.Errorf("the audit log does not verify: %w", r.Mismatch)
	}
	fmt.Println("the chain and its checkpoints verify")
	return nil
}

func exportAudit(ctx context.Context, q audit.Querier, p audit.ExportParams, format string) error {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	out, err := audit.NewWriter(w, format)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--format: want jsonl or csv, not %q", format)}
	}
	if err := audit.Export(ctx, q, p, out.Write); err != nil {
		return err
	}
	return out.Flush()
}

// optionalAmount parses an amount in minor units, nil for "".
func optionalAmount(s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("want a whole number of minor units (2500 for 25.00), not %q", s)
	}
	return &n, nil
}

// optionalTime is parseTime, with "" for the zero time.
func optionalTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return parseTime(s)
}
