package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/tenant"
)

const auditUsage = "usage: oncebox audit verify --tenant T [--public-key HEX] | audit export --tenant T [--since T] [--until T] [--format jsonl|csv]"

// runAudit is `oncebox audit verify` (recompute a tenant's chain and checkpoints; exit
// status 1 naming the first entry that does not match) and `oncebox audit export`.
func runAudit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "the tenant (required)")
	since := fs.String("since", "", "export: start of the window (RFC 3339 or YYYY-MM-DD; default: all)")
	until := fs.String("until", "", "export: end of the window, not included (default: now)")
	format := fs.String("format", "jsonl", "export: jsonl or csv")
	publicKey := fs.String("public-key", "", "verify: the checkpoints' ed25519 public key, hex (default: the key stored with each checkpoint)")
	cfg, _, err := parseConfigFor(fs, args, showOnly())
	if err != nil {
		return &exitError{code: 2, err: err}
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
		p := audit.ExportParams{TenantID: t.ID}
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
	switch format {
	case "jsonl":
		enc := json.NewEncoder(w)
		return audit.Export(ctx, q, p, func(e *audit.Entry) error { return enc.Encode(e) })
	case "csv":
		c := csv.NewWriter(w)
		defer c.Flush()
		if err := c.Write([]string{"seq", "tx", "at", "kind", "op_id", "fingerprint", "entry", "prev_hash", "hash"}); err != nil {
			return err
		}
		return audit.Export(ctx, q, p, func(e *audit.Entry) error {
			return c.Write([]string{strconv.FormatInt(e.Seq, 10), strconv.FormatUint(e.Tx, 10), e.At.UTC().Format(time.RFC3339Nano),
				e.Kind, e.OpID, base64.StdEncoding.EncodeToString(e.Fingerprint), string(e.Fields), hex.EncodeToString(e.PrevHash), hex.EncodeToString(e.Hash)})
		})
	}
	return &exitError{code: 2, err: fmt.Errorf("--format: want jsonl or csv, not %q", format)}
}

// optionalTime is parseTime, with "" for the zero time.
func optionalTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return parseTime(s)
}
