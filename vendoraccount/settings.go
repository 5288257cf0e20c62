package vendoraccount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/vendorapi"
)

// Settings are the tenants' own vendor settings, over the installation's: a Stripe
// Connect account the installation's key acts on, or a key of the tenant's own (a Stripe
// secret key, a SendGrid subuser's key), stored only sealed with the seal key. An op
// records its tenant's account at enqueue (outbox.Op.VendorAccount, read by the op's
// insert), so a change applies to the next op without a restart, and an op keeps the
// account it was accepted under. It is safe for concurrent use.
type Settings struct {
	pool   *pgxpool.Pool
	sealer *seal.Sealer
	// keys remembers opened keys by tenant, vendor and fingerprint: a fingerprint
	// names one key for good, so an entry never goes stale.
	keys sync.Map
}

// New returns the settings stored in pool, whose keys are sealed with sealKey
// (outbox.Config.SealKey, 32 bytes; nil: keys can be neither set nor used, accounts
// can).
func New(pool *pgxpool.Pool, sealKey []byte) (*Settings, error) {
	s := &Settings{pool: pool}
	if sealKey != nil {
		var err error
		if s.sealer, err = seal.New(sealKey); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Setting is one tenant's setting for one vendor, without its secret.
type Setting struct {
	TenantID int64  `json:"tenant_id"`
	Vendor   string `json:"vendor"`
	// Account is the connected account ("acct_…"), "" for an own key.
	Account string `json:"account,omitempty"`
	// KeyFingerprint (KeyFingerprint of the key) and KeyHint (its last 4 characters)
	// tell an own key apart without showing it; "" for an account.
	KeyFingerprint string    `json:"key_fingerprint,omitempty"`
	KeyHint        string    `json:"key_hint,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
	UpdatedBy      string    `json:"updated_by"`
}

// SetParams is a tenant's new setting for a vendor: exactly one of Account and
// APIKey.
type SetParams struct {
	TenantID int64
	Vendor   string
	Account  string
	APIKey   string
	// By says who sets it ("cli:alice").
	By string
	// Shared allows the account or key to be another tenant's too. A Connect account or
	// key serves one tenant by default: two tenants on one account share its objects and
	// its events. Defaults to false.
	Shared bool
}

// ErrAccountTaken is returned by Set for an account or key another tenant already has
// (SetParams.Shared allows it).
var ErrAccountTaken = errors.New("the vendor account is another tenant's")

// MaxRefBytes bounds a connected account id and a key.
const MaxRefBytes = 1024

// KeyFingerprint names a key without showing it: the first 16 hex digits of its SHA-256.
func KeyFingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// keyHint is the last 4 characters of a key, as vendors' dashboards show them.
func keyHint(key string) string {
	if len(key) <= 8 {
		return "…"
	}
	return "…" + key[len(key)-4:]
}

func vendorKeyAAD(vendor string) string { return "\x00vendor-key\x00" + vendor }

// Set stores a tenant's setting for a vendor, replacing the one it had. A key is
// sealed; the keys that no unfinished op of the tenant names any more are removed.
func (s *Settings) Set(ctx context.Context, p SetParams) error {
	if err := p.validate(); err != nil {
		return err
	}
	account, hint := p.Account, ""
	var sealed []byte
	if p.APIKey != "" {
		if s.sealer == nil {
			return errors.New("vendoraccount: a vendor key is stored only sealed: set the seal key (ONCEBOX_SEAL_KEY)")
		}
		fp := KeyFingerprint(p.APIKey)
		var err error
		if sealed, err = s.sealer.Seal(p.TenantID, vendorKeyAAD(p.Vendor), []byte(p.APIKey)); err != nil {
			return err
		}
		account, hint = vendorapi.KeyRefPrefix+fp, keyHint(p.APIKey)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !p.Shared {
			if err := accountFree(ctx, tx, p, account); err != nil {
				return err
			}
		}
		if sealed != nil {
			if _, err := tx.Exec(ctx, sqlInsertVendorKey, p.TenantID, p.Vendor, strings.TrimPrefix(account, vendorapi.KeyRefPrefix), sealed); err != nil {
				return fmt.Errorf("vendoraccount: store the tenant's vendor key: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, sqlSetTenantVendor, p.TenantID, p.Vendor, account, nilIfEmpty(hint), p.By); err != nil {
			return fmt.Errorf("vendoraccount: store the tenant's vendor setting: %w", err)
		}
		return s.pruneKeys(ctx, tx, p.TenantID, p.Vendor)
	})
}

func (p SetParams) validate() error {
	if p.TenantID == 0 || p.Vendor == "" {
		return errors.New("vendoraccount: a vendor setting needs a tenant and a vendor")
	}
	if (p.Account == "") == (p.APIKey == "") {
		return errors.New("vendoraccount: a vendor setting is an account or a key, exactly one of them")
	}
	for _, v := range []struct{ name, value string }{{"account", p.Account}, {"key", p.APIKey}} {
		if len(v.value) > MaxRefBytes || strings.ContainsFunc(v.value, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
			// The value itself is never repeated: it may be a secret.
			return fmt.Errorf("vendoraccount: the vendor %s must be at most %d bytes without spaces or control characters", v.name, MaxRefBytes)
		}
	}
	if strings.HasPrefix(p.Account, vendorapi.KeyRefPrefix) {
		return fmt.Errorf("vendoraccount: an account may not start with %q", vendorapi.KeyRefPrefix)
	}
	if want := vendorKeyPrefixes[p.Vendor]; p.APIKey != "" && len(want) > 0 &&
		!slices.ContainsFunc(want, func(pre string) bool { return strings.HasPrefix(p.APIKey, pre) }) {
		return fmt.Errorf("vendoraccount: a %s key begins with %s; this one does not (a publishable or mistyped key cannot send)",
			p.Vendor, strings.Join(want, " or "))
	}
	return nil
}

// vendorKeyPrefixes are how the keys a tenant may set begin, per vendor: Stripe's secret
// and restricted keys (a publishable pk_ key cannot charge), SendGrid's API keys.
var vendorKeyPrefixes = map[string][]string{"stripe": {"sk_", "rk_"}, "sendgrid": {"SG."}}

// accountFree refuses an account (or key reference) that another tenant has at the
// same vendor, naming that tenant: the caller is an operator.
func accountFree(ctx context.Context, tx pgx.Tx, p SetParams, account string) error {
	var other string
	err := tx.QueryRow(ctx, sqlVendorAccountHolder, p.TenantID, p.Vendor, account).Scan(&other)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vendoraccount: read who has the vendor account: %w", err)
	}
	what := "account " + account
	if strings.HasPrefix(account, vendorapi.KeyRefPrefix) {
		what = "this key"
	}
	return fmt.Errorf("vendoraccount: %s at %s is already tenant %q's; one account serves one tenant, so that neither acts on "+
		"or hears of the other's objects (share it on purpose with --shared): %w", what, p.Vendor, other, ErrAccountTaken)
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// pruneKeys removes the tenant's keys of vendor that neither its setting nor an
// unfinished op names.
func (s *Settings) pruneKeys(ctx context.Context, tx pgx.Tx, tenantID int64, vendor string) error {
	if _, err := tx.Exec(ctx, sqlPruneVendorKeys, tenantID, vendor); err != nil {
		return fmt.Errorf("vendoraccount: remove unused vendor keys: %w", err)
	}
	return nil
}

// Delete removes a tenant's setting for a vendor: its next ops use the installation's
// settings. It reports whether there was one.
func (s *Settings) Delete(ctx context.Context, tenantID int64, vendor string) (bool, error) {
	var deleted bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlDeleteTenantVendor, tenantID, vendor)
		if err != nil {
			return fmt.Errorf("vendoraccount: delete the tenant's vendor setting: %w", err)
		}
		deleted = tag.RowsAffected() > 0
		return s.pruneKeys(ctx, tx, tenantID, vendor)
	})
	return deleted, err
}

// List returns the settings of a tenant (every tenant's when tenantID is 0), by tenant
// and vendor, without their secrets.
func (s *Settings) List(ctx context.Context, tenantID int64) ([]Setting, error) {
	rows, err := s.pool.Query(ctx, sqlTenantVendors, tenantID)
	if err != nil {
		return nil, fmt.Errorf("vendoraccount: list vendor settings: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Setting, error) {
		var (
			v       Setting
			account string
		)
		err := r.Scan(&v.TenantID, &v.Vendor, &account, &v.KeyHint, &v.UpdatedAt, &v.UpdatedBy)
		if fp, ok := strings.CutPrefix(account, vendorapi.KeyRefPrefix); ok {
			v.KeyFingerprint = fp
		} else {
			v.Account = account
		}
		return v, err
	})
}

// StripeEvents is the vendor name under which a tenant on its own Stripe key
// keeps its own Stripe endpoint's signing secret (whsec_…), sealed like its key: the
// events of its account are verified with it at its own endpoint, never with the
// platform's secret.
const StripeEvents = "stripe-events"

// Secret returns the tenant's own secret stored for vendor (its key, or its signing
// secret for StripeEvents), opened, or "" when the tenant has none.
func (s *Settings) Secret(ctx context.Context, tenantID int64, vendor string) (string, error) {
	var ref string
	err := s.pool.QueryRow(ctx, sqlTenantVendorRef, tenantID, vendor).Scan(&ref)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("vendoraccount: read the tenant's %s setting: %w", vendor, err)
	}
	if !strings.HasPrefix(ref, vendorapi.KeyRefPrefix) {
		return "", nil
	}
	if s.sealer == nil {
		return "", fmt.Errorf("vendoraccount: the tenant's %s secret is sealed and no seal key is set (ONCEBOX_SEAL_KEY)", vendor)
	}
	acct, err := s.Account(ctx, tenantID, vendor, ref)
	return acct.APIKey, err
}

// TenantOfAccount returns the tenant whose setting for vendor is the connected account
// account, 0 when none is.
func (s *Settings) TenantOfAccount(ctx context.Context, vendor, account string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, sqlTenantOfAccount, vendor, account).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("vendoraccount: find the tenant of account %s: %w", account, err)
	}
	return id, nil
}

// Account returns the account an op of the tenant recorded as ref (outbox.Op.VendorAccount)
// acts on, with the key it names opened. A ref without a key is returned as it is,
// with no query.
func (s *Settings) Account(ctx context.Context, tenantID int64, vendor, ref string) (vendorapi.Account, error) {
	fp, ok := strings.CutPrefix(ref, vendorapi.KeyRefPrefix)
	if !ok {
		return vendorapi.Account{Ref: ref}, nil
	}
	cacheKey := strconv.FormatInt(tenantID, 10) + "\x00" + vendor + "\x00" + fp
	if k, ok := s.keys.Load(cacheKey); ok {
		return vendorapi.Account{Ref: ref, APIKey: k.(string)}, nil
	}
	var sealed []byte
	err := s.pool.QueryRow(ctx, sqlVendorKey, tenantID, vendor, fp).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return vendorapi.Account{}, fmt.Errorf("vendoraccount: the tenant's %s key %s is no longer stored", vendor, fp)
	}
	if err != nil {
		return vendorapi.Account{}, fmt.Errorf("vendoraccount: read the tenant's %s key: %w", vendor, err)
	}
	key, err := s.sealer.Open(tenantID, vendorKeyAAD(vendor), sealed)
	if err != nil {
		return vendorapi.Account{}, fmt.Errorf("vendoraccount: the tenant's %s key %s: %w", vendor, fp, err)
	}
	s.keys.Store(cacheKey, string(key))
	return vendorapi.Account{Ref: ref, APIKey: string(key)}, nil
}
