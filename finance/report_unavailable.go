package finance

import (
	"errors"
	"fmt"
	"strings"

	"github.com/oncebox/oncebox/vendorapi"
)

// Unavailable is a vendor account a report could not list: the vendor refused it, or
// could not be reached. The report stands without it; the ops of the window on it are
// unchecked lines.
type Unavailable struct {
	Vendor string `json:"vendor"`
	// Account is the account's ref as the ops recorded it (outbox.Op.VendorAccount):
	// empty for the installation's account, "acct_…" for a Stripe Connect account,
	// "key:…" for a tenant's own key.
	Account string `json:"account,omitempty"`
	// TenantID is the tenant whose own key the account is; 0 otherwise.
	TenantID int64 `json:"tenant_id,omitempty"`
	// Refused is set when the vendor answered that the key may not read the account
	// (a 401 or 403, vendorapi.ErrLookupUnavailable), or the account could not be opened:
	// waiting does not help, a person must fix the setting. Unset, the vendor could
	// not be reached or failed, which is usually temporary.
	Refused bool `json:"refused"`
	// Reason is a sentence for a finance person: what could not be listed, what it
	// means for the lines, and what to do.
	Reason string `json:"reason"`
	// Error is the error the vendor or the adapter gave, without secrets.
	Error string `json:"error"`
}

// errAccountUnopened says the account an op recorded could not be opened
// (ReportParams.Accounts failed: a tenant's key no longer stored).
var errAccountUnopened = errors.New("the account cannot be opened")

// unavailable describes an account that could not be listed.
func unavailable(vendor string, a listAccount, err error) Unavailable {
	u := Unavailable{Vendor: vendor, Account: a.ref, TenantID: a.tenantID, Error: err.Error()}
	name := vendorName(vendor)
	account := "the installation's " + name + " account"
	switch {
	case strings.HasPrefix(a.ref, vendorapi.KeyRefPrefix):
		account = fmt.Sprintf("tenant %d's own %s key (%s)", a.tenantID, name, a.ref)
	case a.ref != "":
		account = name + " account " + a.ref
	}
	u.Refused = errors.Is(err, vendorapi.ErrLookupUnavailable) || errors.Is(err, errAccountUnopened)
	if u.Refused {
		u.Reason = fmt.Sprintf("%s refused to list %s, so the ops sent to it were not compared with its records. "+
			"Waiting will not help: check that the account is still connected to this installation and that the tenant's %s setting "+
			"names the right account (the console's Vendors page, or oncebox tenant vendor list), or check these ops in %s's dashboard by hand.",
			name, account, vendor, name)
		return u
	}
	u.Reason = fmt.Sprintf("%s could not be listed for %s (it could not be reached or answered an error), "+
		"so the ops sent to it were not compared with its records. This is usually temporary: run the report again later; "+
		"if it persists, check %s's status page and this installation's network.", name, account, name)
	return u
}

// vendorName is how a vendor is named to people: "stripe" is "Stripe".
func vendorName(vendor string) string {
	switch vendor {
	case "stripe":
		return "Stripe"
	case "sendgrid":
		return "SendGrid"
	case "":
		return "the vendor"
	}
	return vendor
}
