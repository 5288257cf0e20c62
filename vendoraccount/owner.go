package vendoraccount

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Owner is a tenant's claim on the installation's own account at a vendor
// (`oncebox tenant vendor own`): while it is the installation's only tenant, the
// objects in that account are its own without adoption (docs/approvals-and-budgets.md).
type Owner struct {
	TenantID int64  `json:"tenant_id"`
	Vendor   string `json:"vendor"`
	// OwnedAt and OwnedBy say when and by whom the claim was made.
	OwnedAt time.Time `json:"owned_at"`
	OwnedBy string    `json:"owned_by"`
	// InForce is false once another tenant exists, or the installation has several cells
	// (docs/scaling.md): the claim then counts for nothing.
	InForce bool `json:"in_force"`
}

// ErrNotOnlyTenant is returned by Own when the installation has another tenant than the
// one claiming its account: the account's objects may be that tenant's.
var ErrNotOnlyTenant = errors.New("the installation has more than one tenant")

// Own records that the tenant owns the installation's own account at vendor: by says
// who claims it. It is refused with ErrNotOnlyTenant unless the tenant is the
// installation's only tenant. Claiming it again keeps the first claim's time and
// author; another tenant's earlier claim is replaced.
func (s *Settings) Own(ctx context.Context, tenantID int64, vendor, by string) error {
	if tenantID == 0 || vendor == "" || by == "" {
		return errors.New("vendoraccount: a claim on the installation's account needs a tenant, a vendor and who makes it")
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var others int
		var cells bool
		if err := tx.QueryRow(ctx, sqlOtherTenants, tenantID).Scan(&others, &cells); err != nil {
			return fmt.Errorf("vendoraccount: count the tenants: %w", err)
		}
		if cells {
			return fmt.Errorf("vendoraccount: the installation has several cells, whose tenants this one cannot count, and the installation's %s account may hold their objects: "+
				"adopt the objects instead (oncebox tenant adopt), or give the tenant an account of its own: %w", vendor, ErrNotOnlyTenant)
		}
		if others > 0 {
			return fmt.Errorf("vendoraccount: %d other tenant(s) exist, and the installation's %s account may hold their objects: "+
				"adopt the objects instead (oncebox tenant adopt), or give the tenant an account of its own: %w", others, vendor, ErrNotOnlyTenant)
		}
		if _, err := tx.Exec(ctx, sqlOwnVendor, vendor, tenantID, by); err != nil {
			return fmt.Errorf("vendoraccount: record the claim on the installation's account: %w", err)
		}
		return nil
	})
}

// Disown removes the tenant's claim on the installation's account at vendor: the
// account's objects need adoption again. It reports whether there was one.
func (s *Settings) Disown(ctx context.Context, tenantID int64, vendor string) (bool, error) {
	tag, err := s.pool.Exec(ctx, sqlDisownVendor, vendor, tenantID)
	if err != nil {
		return false, fmt.Errorf("vendoraccount: remove the claim on the installation's account: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Owners returns the claims on the installation's accounts, the tenant's only when
// tenantID is not 0, by vendor.
func (s *Settings) Owners(ctx context.Context, tenantID int64) ([]Owner, error) {
	rows, err := s.pool.Query(ctx, sqlVendorOwners, tenantID)
	if err != nil {
		return nil, fmt.Errorf("vendoraccount: list the claims on the installation's accounts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Owner, error) {
		var o Owner
		err := r.Scan(&o.TenantID, &o.Vendor, &o.OwnedAt, &o.OwnedBy, &o.InForce)
		return o, err
	})
}
