package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Object is an object at a vendor that a tenant adopted: its ops may act on it (a
// refund of a payment made outside oncebox) although none of them made it.
type Object struct {
	// Tenant is the tenant's name.
	Tenant string
	// Vendor is the vendor's name, as the tools that act on it name it: "stripe", or
	// "catalog_<target>" for a catalog target.
	Vendor string
	// ID is the object's id at the vendor, such as "pi_3Mtw…".
	ID string
	// AdoptedAt is when it was adopted.
	AdoptedAt time.Time
	// AdoptedBy says who adopted it ("cli:alice", or the TTL purge keeping the object
	// of an op it deleted).
	AdoptedBy string
}

// MaxObjectIDBytes bounds an adopted object's id.
const MaxObjectIDBytes = 255

// Adopt makes the objects ids of vendor the named tenant's, so that its ops may act on
// them (vendorapi.Tool.Objects); by says who adopts them. Adopting an object again keeps
// the first adoption. It returns how many were new.
func (s *Store) Adopt(ctx context.Context, tenantName, vendor string, ids []string, by string) (int, error) {
	if vendor == "" || len(ids) == 0 {
		return 0, errors.New("tenant: adopt needs a vendor and at least one object id")
	}
	for _, id := range ids {
		if id == "" || len(id) > MaxObjectIDBytes || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return 0, fmt.Errorf("tenant: object id %q: want 1 to %d bytes without spaces or control characters", id, MaxObjectIDBytes)
		}
	}
	t, err := s.ByName(ctx, tenantName)
	if err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, sqlAdopt, t.ID, vendor, ids, by)
	if err != nil {
		return 0, fmt.Errorf("tenant: adopt: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Objects lists the objects the named tenant adopted, or every tenant's when
// tenantName is "", by tenant, vendor and id.
func (s *Store) Objects(ctx context.Context, tenantName string) ([]Object, error) {
	if tenantName != "" {
		if _, err := s.ByName(ctx, tenantName); err != nil {
			return nil, err
		}
	}
	rows, err := s.pool.Query(ctx, sqlObjects, tenantName)
	if err != nil {
		return nil, fmt.Errorf("tenant: list adopted objects: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Object, error) {
		var o Object
		err := r.Scan(&o.Tenant, &o.Vendor, &o.ID, &o.AdoptedAt, &o.AdoptedBy)
		return o, err
	})
}
