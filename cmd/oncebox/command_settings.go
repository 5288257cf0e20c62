package main

import "strings"

// Which serve settings each subcommand shows as flags. A subcommand that builds a
// server but does not run one (lookup, review, approve, reject, reconcile, mcp, tenant
// policy) lists only the settings it uses; the others still take their environment
// variables (parseConfigFor), so it is configured like the serve beside it.

// vendorSettings reach the vendors and the tool catalog: what a command needs to know
// an op's tool and to ask its vendor.
var vendorSettings = []string{
	"stripe-api-key", "stripe-api-base", "stripe-timeout", "stripe-search-lag",
	"sendgrid-api-key", "sendgrid-api-base", "sendgrid-timeout", "sendgrid-lookup-lag", "sendgrid-activity-rate",
	"webhook-targets", "webhook-timeout", "webhook-native-keys", "webhook-lookup-path", "webhook-lookup-lag",
	"tools-file", "tenant-catalogs", "tenant-upstream-commands", "tenant-egress-allow", "redact-mail", "seal-key",
}

// governanceSettings are the approval policy and the budgets.
var governanceSettings = []string{"approval-policy", "refund-approval-above", "approval-expiry", "budgets"}

// recordSettings shape an op when it is recorded.
var recordSettings = []string{"ttl", "tool-ttl", "max-attempts", "notify-url", "notify-secret", "notify-link-base",
	"mcp-dedupe-window", "mcp-wait", "max-waits-per-tenant"}

// reconcileSettings tune a reconciler sweep.
var reconcileSettings = []string{"reconcile-sweep-timeout", "reconcile-retry-after", "reconcile-batch", "reconcile-concurrency",
	"reconcile-stuck-margin", "resend-on-none", "vendor-event-lag", "max-attempts"}

// cellSettings are shown by the commands that name a tenant (--tenant): with --cells
// and the home cell's URL, they work in the tenant's cell (inTenantCell).
var cellSettings = []string{"cells"}

// showOnly shows --database-url and the settings of groups, and no other.
func showOnly(groups ...[]string) func(string) bool {
	shown := map[string]bool{flagDatabaseURL: true}
	for _, g := range groups {
		for _, name := range g {
			shown[name] = true
		}
	}
	return func(name string) bool {
		// A vendor's job timeout bounds when the reconciler takes a stuck op.
		if strings.HasSuffix(name, "-job-timeout") {
			return shown["reconcile-stuck-margin"]
		}
		return shown[name]
	}
}
