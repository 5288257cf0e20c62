package stripe

import (
	"context"
	"strings"

	"github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/vendorapi"
)

// conn is what one call acts on: the client of the key it sends, the connected account
// it names in the Stripe-Account header ("" none), and the secrets its errors must not
// show.
type conn struct {
	api     *client.API
	account string
	secrets []string
}

// conn returns the connection of account acct: the tenant's own key when it has one
// (a client per key, kept), else the installation's key, on acct's connected account
// if any.
func (v *Vendor) conn(acct vendorapi.Account) conn {
	if acct.APIKey == "" {
		return conn{api: v.sc, account: acct.Connected(), secrets: []string{v.cfg.APIKey}}
	}
	api, ok := v.keyed.Load(acct.APIKey)
	if !ok {
		api, _ = v.keyed.LoadOrStore(acct.APIKey, client.New(acct.APIKey, v.backends))
	}
	return conn{api: api.(*client.API), secrets: []string{v.cfg.APIKey, acct.APIKey}}
}

// connFrom is conn of the account ctx carries (vendorapi.AccountFrom), for the reads
// that take no params of the op's.
func (v *Vendor) connFrom(ctx context.Context) conn { return v.conn(vendorapi.AccountFrom(ctx)) }

// on makes a request's params name the connected account, if any (the Stripe-Account
// header).
func (c conn) on(p interface{ SetStripeAccount(string) }) {
	if c.account != "" {
		p.SetStripeAccount(c.account)
	}
}

// hide replaces every secret of c in s.
func (c conn) hide(s string) string {
	for _, k := range c.secrets {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[REDACTED]")
		}
	}
	return s
}

// shows reports whether s contains a secret of c.
func (c conn) shows(s string) bool {
	for _, k := range c.secrets {
		if k != "" && strings.Contains(s, k) {
			return true
		}
	}
	return false
}
