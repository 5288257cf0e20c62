package console

import (
	"net/http"
	"slices"
	"time"

	"github.com/oncebox/oncebox/vendoraccount"
)

// settableVendors are the vendors a tenant may have settings of its own for (`oncebox
// tenant vendor`); the Vendors page lists each, set or not.
var settableVendors = []string{"stripe", "sendgrid"}

// vendorRow is one vendor on the Vendors page: what the tenant's ops are sent with.
// It never holds a key: an own key is shown by its fingerprint and last 4 characters.
type vendorRow struct {
	Vendor string
	// Account is the connected account ("acct_…"); Fingerprint and Hint name an own
	// key; all three "" for the installation's account.
	Account, Fingerprint, Hint string
	// Set is false when the tenant has no setting for the vendor.
	Set       bool
	UpdatedAt time.Time
	UpdatedBy string
	// Claim is the tenant's claim on the installation's account (`oncebox tenant vendor
	// own`), nil when it has none.
	Claim *vendoraccount.Owner
}

// vendors is the Vendors page: per vendor, the tenant's Connect account, its own key
// (fingerprint and last 4 characters, never the key) or the installation's account,
// and when it was set and by whom.
func (c *Console) vendors(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "vendors")
	v.Title = "Vendors"
	settings, err := c.cfg.Outbox.VendorSettings().List(r.Context(), s.principal.ID)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	owners, err := c.cfg.Outbox.VendorSettings().Owners(r.Context(), s.principal.ID)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	v.Vendors = vendorRows(settings, owners)
	c.render(w, r, http.StatusOK, "vendors", v)
}

// vendorRows are the rows of settableVendors, then of any other vendor the tenant has
// a setting for or claims the installation's account of, in the order List and Owners
// give them.
func vendorRows(settings []vendoraccount.Setting, owners []vendoraccount.Owner) []vendorRow {
	byVendor := make(map[string]vendoraccount.Setting, len(settings))
	claims := make(map[string]*vendoraccount.Owner, len(owners))
	order := append([]string(nil), settableVendors...)
	for _, st := range settings {
		if !slices.Contains(order, st.Vendor) {
			order = append(order, st.Vendor)
		}
		byVendor[st.Vendor] = st
	}
	for i, o := range owners {
		if !slices.Contains(order, o.Vendor) {
			order = append(order, o.Vendor)
		}
		claims[o.Vendor] = &owners[i]
	}
	rows := make([]vendorRow, 0, len(order))
	for _, name := range order {
		st, ok := byVendor[name]
		rows = append(rows, vendorRow{Vendor: name, Set: ok, Account: st.Account, Fingerprint: st.KeyFingerprint,
			Hint: st.KeyHint, UpdatedAt: st.UpdatedAt, UpdatedBy: st.UpdatedBy, Claim: claims[name]})
	}
	return rows
}
