// Package finance compares the outbox with the vendors for finance. It only reads:
// settling ops whose outcome is unknown, and manual review, belong to package outbox
// (Outbox.ReconcileOnce, Outbox.ListReview).
//
// # Finance report
//
// BuildReport compares the ops created in a window with the objects each vendor's
// Lister returns, line by line (matched, missing_at_vendor, orphan_at_vendor,
// duplicate, mismatch, and unchecked for an op whose vendor has no Lister or whose
// account could not be listed), with totals of the matched amounts per tool and
// currency; it writes itself as JSON, or as two CSV tables (the lines, the totals) with
// decimal amounts. An account that cannot be listed (the vendor refuses it, or is down)
// never fails the report: its ops are unchecked, with a sentence in Report.Unavailable.
// A report is clean only when every line matched.
package finance
