package vendorapi

import (
	"context"
	"log/slog"
	"strings"
)

// KeyRefPrefix starts the Op.VendorAccount of an op sent with its tenant's own key; the
// key's fingerprint (KeyFingerprint) follows.
const KeyRefPrefix = "key:"

// Account is the vendor account an op is sent on: its Op.VendorAccount, with the key it
// names opened. Its String and LogValue never show the key.
type Account struct {
	// Ref is the op's VendorAccount: "" for the installation's settings, a Stripe
	// Connect account ("acct_…") the installation's key acts on, or KeyRefPrefix and
	// the fingerprint of the tenant's own key.
	Ref string
	// APIKey is the tenant's own key when Ref names one, "" otherwise. It is a secret:
	// send it only to the vendor.
	APIKey string
}

// Connected returns the connected account the installation's key acts on (Stripe's
// Stripe-Account header), or "" when the op uses no connected account.
func (a Account) Connected() string {
	if strings.HasPrefix(a.Ref, KeyRefPrefix) {
		return ""
	}
	return a.Ref
}

// String returns Ref, never the key.
func (a Account) String() string { return a.Ref }

// GoString returns Ref, never the key, for %#v.
func (a Account) GoString() string { return "vendorapi.Account{Ref:" + a.Ref + "}" }

// LogValue logs Ref, never the key.
func (a Account) LogValue() slog.Value { return slog.StringValue(a.Ref) }

type accountKey struct{}

// WithAccount returns ctx carrying the vendor account a call acts on, for the vendor
// reads that take no params of the op's: a Tool's Price and ObjectArg.Tag during the
// enqueue, a finance Lister. AccountFrom reads it back.
func WithAccount(ctx context.Context, a Account) context.Context {
	return context.WithValue(ctx, accountKey{}, a)
}

// AccountFrom returns the account WithAccount put in ctx: the zero Account (the
// installation's settings) when none.
func AccountFrom(ctx context.Context) Account {
	a, _ := ctx.Value(accountKey{}).(Account)
	return a
}
