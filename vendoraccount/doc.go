// Package vendoraccount holds the tenants' own vendor accounts: a tenant's setting per
// vendor over the installation's (a Stripe Connect account the installation's key acts
// on, or a key of the tenant's own, stored only sealed with the seal key), the signing
// secret of a tenant's own Stripe endpoint (StripeEvents), and a tenant's claim on the
// installation's own account while it is the only tenant (Settings.Own).
//
// The outbox records a tenant's account on each op at enqueue and opens its key at
// dispatch through Settings.Account; outbox.Outbox.VendorSettings returns the settings
// of an Outbox. The package never imports outbox: `oncebox tenant vendor`, the console,
// the vendor-event endpoints and the finance report use it on its own, with New.
package vendoraccount
