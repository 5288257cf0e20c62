package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendoraccount"
)

const vendorUsage = "usage: oncebox tenant vendor set --tenant T [--shared] stripe (--account acct_… | --key-stdin) | " +
	"set --tenant T sendgrid --key-stdin | set --tenant T stripe-events --key-stdin | list [--tenant T] [--format text|json] | delete --tenant T VENDOR | " +
	"own --tenant T stripe | disown --tenant T stripe"

// tenantVendors are the vendors a tenant may have settings of its own for; stripe-events
// (vendoraccount.StripeEvents) is the signing secret of the tenant's own Stripe event
// endpoint, for a tenant on its own Stripe key.
var tenantVendors = map[string]bool{"stripe": true, "sendgrid": true, vendoraccount.StripeEvents: true}

// stripeAccountRE is a Stripe Connect account id.
var stripeAccountRE = regexp.MustCompile(`^acct_[A-Za-z0-9]{1,250}$`)

// vendorFlags are the flags of `oncebox tenant vendor`.
type vendorFlags struct {
	g                                *globalFlags
	tenant, account, format, sealKey *string
	keyStdin, shared                 *bool
}

// runTenantVendor is `oncebox tenant vendor`: a tenant's own vendor account (a Stripe
// Connect account) or key (its own Stripe key, a SendGrid subuser's key, read from
// standard input and stored sealed), over the installation's settings. Every serve
// process applies a change to the tenant's next op; an op keeps the account it was
// accepted under. No secret is ever printed.
func runTenantVendor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenant vendor", flag.ContinueOnError)
	f := &vendorFlags{g: addGlobalFlags(fs)}
	f.tenant = fs.String("tenant", "", "the tenant's name (required with set and delete; with list: only its settings)")
	f.account = fs.String("account", "", "with set stripe: the tenant's Stripe Connect account (acct_…), which the installation's key acts on")
	f.keyStdin = fs.Bool("key-stdin", false, "with set: read the tenant's own API key (a Stripe secret key, a SendGrid subuser's key) from standard input")
	f.shared = fs.Bool("shared", false, "with set: allow an account or key another tenant has too (by default one account serves one tenant: two tenants on one account share its objects and its events)")
	f.format = fs.String("format", "text", "with list: text or json")
	f.sealKey = secretVar(fs, "seal-key", "ONCEBOX_SEAL_KEY", "", "with set --key-stdin: the installation's seal key, as serve's (env ONCEBOX_SEAL_KEY)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if _, err := f.g.log.logger(); err != nil {
		return err
	}
	rest := fs.Args()
	if err := f.check(rest); err != nil {
		return &exitError{code: 2, err: err}
	}
	pool, err := openMigratedPool(ctx, f.g.databaseURL())
	if err != nil {
		return err
	}
	defer pool.Close()
	settings, err := vendoraccount.New(pool, f.sealKeyBytes())
	if err != nil {
		return err
	}
	c := vendorCtx{f: f, store: tenant.NewStore(pool), settings: settings}
	switch rest[0] {
	case "set":
		return c.set(ctx, rest[1])
	case "delete":
		return c.delete(ctx, rest[1])
	case "own":
		return c.own(ctx, rest[1])
	case "disown":
		return c.disown(ctx, rest[1])
	}
	return c.list(ctx)
}

// check checks the positional arguments and the flags they need.
func (f *vendorFlags) check(rest []string) error {
	switch {
	case len(rest) == 1 && rest[0] == "list":
		if *f.format != "text" && *f.format != "json" {
			return fmt.Errorf("--format %q: want text or json", *f.format)
		}
		return nil
	case len(rest) != 2 || !slices.Contains([]string{"set", "delete", "own", "disown"}, rest[0]) || *f.tenant == "":
		return errors.New(vendorUsage)
	case rest[0] == "own" || rest[0] == "disown":
		if !ownableVendor(rest[1]) {
			return fmt.Errorf("vendor %q: a tenant may own the installation's stripe account (or a catalog target's, catalog_<target>)", rest[1])
		}
		return nil
	case !tenantVendors[rest[1]]:
		return fmt.Errorf("vendor %q: a tenant may have settings for stripe, sendgrid or stripe-events", rest[1])
	case rest[0] == "delete":
		return nil
	case (*f.account == "") == !*f.keyStdin:
		return errors.New("set needs exactly one of --account and --key-stdin")
	case *f.account != "" && rest[1] == vendoraccount.StripeEvents:
		return errors.New("stripe-events is the signing secret (whsec_…) of the tenant's own Stripe endpoint: pipe it to --key-stdin")
	case *f.account != "" && rest[1] != "stripe":
		return errors.New("--account is a Stripe Connect account: a SendGrid subuser sends with its own key (--key-stdin)")
	case *f.account != "" && !stripeAccountRE.MatchString(*f.account):
		return fmt.Errorf("--account %q is not a Stripe account id such as acct_1Nv0FGQ9RKHgCVdK", *f.account)
	}
	return nil
}

// sealKeyBytes is --seal-key decoded, nil when it is not a valid key (set --key-stdin
// then says so).
func (f *vendorFlags) sealKeyBytes() []byte {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*f.sealKey))
	if err != nil || len(k) != seal.KeySize {
		return nil
	}
	return k
}

// vendorCtx is what a vendor subcommand works with.
type vendorCtx struct {
	f        *vendorFlags
	store    *tenant.Store
	settings *vendoraccount.Settings
}

func (c vendorCtx) set(ctx context.Context, vendor string) error {
	t, err := c.store.ByName(ctx, *c.f.tenant)
	if err != nil {
		return err
	}
	p := vendoraccount.SetParams{TenantID: t.ID, Vendor: vendor, Account: *c.f.account, By: cliActor(), Shared: *c.f.shared}
	if *c.f.keyStdin {
		if c.f.sealKeyBytes() == nil {
			return &exitError{code: 2, err: errors.New("a key is stored only sealed: set --seal-key or ONCEBOX_SEAL_KEY to the installation's seal key (base64 of 32 bytes)")}
		}
		if p.APIKey, err = readKey(os.Stdin); err != nil {
			return &exitError{code: 2, err: err}
		}
		if vendor == vendoraccount.StripeEvents && !strings.HasPrefix(p.APIKey, "whsec_") {
			return &exitError{code: 2, err: errors.New("stripe-events takes the tenant's Stripe endpoint signing secret, which starts with whsec_")}
		}
	}
	if err := c.settings.Set(ctx, p); err != nil {
		return err
	}
	what := "account " + p.Account
	if p.APIKey != "" {
		what = "its own key " + vendoraccount.KeyFingerprint(p.APIKey)
	}
	if vendor == vendoraccount.StripeEvents {
		fmt.Fprintf(os.Stderr, "tenant %q: its own Stripe endpoint %s%s verifies events with the secret %s\n", t.Name,
			vendorevents.PathStripeTenant, t.Name, vendoraccount.KeyFingerprint(p.APIKey))
		return nil
	}
	fmt.Fprintf(os.Stderr, "tenant %q now uses %s at %s; its next op uses it, ops accepted before keep theirs\n", t.Name, what, vendor)
	return nil
}

// readKey reads a key from the first line of r.
func readKey(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, vendoraccount.MaxRefBytes+2)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the key from standard input: %w", err)
	}
	key := strings.TrimSpace(line)
	if key == "" {
		return "", errors.New("--key-stdin: standard input holds no key (pipe it in: printenv KEY | oncebox tenant vendor set ...)")
	}
	return key, nil
}

func (c vendorCtx) delete(ctx context.Context, vendor string) error {
	t, err := c.store.ByName(ctx, *c.f.tenant)
	if err != nil {
		return err
	}
	deleted, err := c.settings.Delete(ctx, t.ID, vendor)
	if err != nil {
		return err
	}
	if !deleted {
		return &exitError{code: 1, err: fmt.Errorf("tenant %q has no %s setting of its own", t.Name, vendor)}
	}
	fmt.Fprintf(os.Stderr, "tenant %q uses the installation's %s settings from its next op\n", t.Name, vendor)
	return nil
}

// vendorRow is one listed setting: never a secret.
type vendorRow struct {
	Tenant         string    `json:"tenant"`
	Vendor         string    `json:"vendor"`
	Account        string    `json:"account,omitempty"`
	KeyFingerprint string    `json:"key_fingerprint,omitempty"`
	KeyHint        string    `json:"key_hint,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
	UpdatedBy      string    `json:"updated_by"`
	// OwnsInstallationAccount marks a claim on the installation's own account (tenant
	// vendor own), in force only while the tenant is the only one (ClaimInForce).
	OwnsInstallationAccount bool `json:"owns_installation_account,omitempty"`
	ClaimInForce            bool `json:"claim_in_force,omitempty"`
}

func (c vendorCtx) list(ctx context.Context) error {
	var id int64
	if *c.f.tenant != "" {
		t, err := c.store.ByName(ctx, *c.f.tenant)
		if err != nil {
			return err
		}
		id = t.ID
	}
	rows, err := c.rows(ctx, id)
	if err != nil {
		return err
	}
	if *c.f.format == "json" {
		return json.NewEncoder(os.Stdout).Encode(rows)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tVENDOR\tACCOUNT\tKEY\tUPDATED\tBY")
	for _, r := range rows {
		key, account := "-", cmp.Or(r.Account, "-")
		if r.KeyFingerprint != "" {
			key = r.KeyFingerprint + " " + r.KeyHint
		}
		if r.OwnsInstallationAccount {
			account = "owns the installation's"
			if !r.ClaimInForce {
				account += " (not in force: other tenants exist)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Tenant, r.Vendor, account, key, r.UpdatedAt.Format(time.RFC3339), r.UpdatedBy)
	}
	return w.Flush()
}

// rows are the settings of tenant id (every tenant's for 0), with the tenants' names.
func (c vendorCtx) rows(ctx context.Context, id int64) ([]vendorRow, error) {
	all, err := c.settings.List(ctx, id)
	if err != nil {
		return nil, err
	}
	tenants, err := c.store.List(ctx)
	if err != nil {
		return nil, err
	}
	names := map[int64]string{}
	for _, t := range tenants {
		names[t.ID] = t.Name
	}
	rows := make([]vendorRow, 0, len(all))
	for _, s := range all {
		rows = append(rows, vendorRow{Tenant: names[s.TenantID], Vendor: s.Vendor, Account: s.Account,
			KeyFingerprint: s.KeyFingerprint, KeyHint: s.KeyHint, UpdatedAt: s.UpdatedAt, UpdatedBy: s.UpdatedBy})
	}
	owners, err := c.settings.Owners(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, o := range owners {
		rows = append(rows, vendorRow{Tenant: names[o.TenantID], Vendor: o.Vendor, UpdatedAt: o.OwnedAt, UpdatedBy: o.OwnedBy,
			OwnsInstallationAccount: true, ClaimInForce: o.InForce})
	}
	return rows, nil
}
