package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/server"
)

const reconcileUsage = "usage: oncebox reconcile run | reconcile report --since T [--until T] [--tenant T] [--format summary|csv|totals-csv|json]"

// runReconcile is `oncebox reconcile run` (one sweep now) and `oncebox reconcile report`
// (the finance report, read-only).
func runReconcile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	since := fs.String("since", "", "start of the window (RFC 3339 or YYYY-MM-DD)")
	until := fs.String("until", "", "end of the window, not included (RFC 3339 or YYYY-MM-DD; default now)")
	tenantName := fs.String("tenant", "", "only this tenant's ops")
	format := fs.String("format", "", "summary, csv (the lines), totals-csv (the totals) or json (default: summary on a terminal, csv otherwise)")
	cfg, logger, err := parseServerArgsFor(fs, args, showOnly(cellSettings, vendorSettings, reconcileSettings))
	if err != nil {
		return err
	}
	if err := inTenantCell(ctx, &cfg, *tenantName); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 {
		return &exitError{code: 2, err: errors.New(reconcileUsage)}
	}
	switch pos[0] {
	case "run":
		return reconcileRun(ctx, cfg, logger)
	case "report":
		s, u, err := reportWindow(*since, *until)
		if err != nil {
			return err
		}
		f, err := reportFormat(*format)
		if err != nil {
			return err
		}
		return reconcileReport(ctx, cfg, logger, reportOpts{since: s, until: u, tenant: *tenantName, format: f})
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown reconcile command %q (%s)", pos[0], reconcileUsage)}
}

// reconcileRun is `oncebox reconcile run`: one sweep now, its stats printed as JSON.
func reconcileRun(ctx context.Context, cfg server.Config, logger *slog.Logger) error {
	srv, err := offline(ctx, cfg, logger, false)
	if err != nil {
		return err
	}
	defer srv.Close()
	st, err := srv.Outbox().ReconcileOnce(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(st)
	fmt.Println(string(b))
	return nil
}

// reportWindow reads the report's --since and --until (default now).
func reportWindow(since, until string) (s, u time.Time, err error) {
	s, err = parseTime(since)
	if err != nil || since == "" {
		return s, u, &exitError{code: 2, err: fmt.Errorf("--since: want RFC 3339 or YYYY-MM-DD: %w", err)}
	}
	u = time.Now()
	if until != "" {
		if u, err = parseTime(until); err != nil {
			return s, u, &exitError{code: 2, err: fmt.Errorf("--until: %w", err)}
		}
	}
	if err := finance.CheckWindow(s, u, time.Now()); err != nil {
		return s, u, &exitError{code: 2, err: fmt.Errorf("--since and --until: %w", err)}
	}
	return s, u, nil
}

// reportFormat reads the report's --format: summary on a terminal and csv otherwise
// by default.
func reportFormat(format string) (string, error) {
	if format == "" {
		format = "csv"
		if isTerminal(os.Stdout) {
			format = "summary"
		}
	}
	if format != "csv" && format != "totals-csv" && format != "json" && format != "summary" {
		return "", &exitError{code: 2, err: fmt.Errorf("--format %q: want summary, csv, totals-csv or json", format)}
	}
	return format, nil
}

// reportOpts are the options of `oncebox reconcile report`.
type reportOpts struct {
	since, until time.Time
	// tenant, when set, is the only tenant whose ops the report covers.
	tenant string
	// format is summary, csv, totals-csv or json.
	format string
}

// reconcileReport is `oncebox reconcile report`: the finance report, read-only, on
// stdout. It fails (exit code 1) when a line does not match.
func reconcileReport(ctx context.Context, cfg server.Config, logger *slog.Logger, o reportOpts) error {
	srv, err := offline(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	defer srv.Close()
	var tid int64
	if o.tenant != "" {
		if tid, err = tenantID(ctx, srv, o.tenant); err != nil {
			return err
		}
	}
	rep, err := srv.Report(ctx, o.since, o.until, tid)
	if err != nil {
		return err
	}
	switch o.format {
	case "json":
		err = rep.WriteJSON(os.Stdout)
	case "summary":
		err = printReportSummary(os.Stdout, rep)
	case "totals-csv":
		err = rep.WriteTotalsCSV(os.Stdout)
	default:
		err = rep.WriteCSV(os.Stdout)
	}
	if err != nil {
		return err
	}
	if !rep.Clean() {
		return &exitError{code: 1, err: errors.New(notCleanSentence(rep))}
	}
	return nil
}

// notCleanSentence says why the report is not clean: how many lines do not match, how
// many ops could not be checked, and why (an account that could not be listed, a vendor
// not configured in this process).
func notCleanSentence(rep *finance.Report) string {
	unchecked := 0
	for _, n := range rep.Unchecked {
		unchecked += n
	}
	s := fmt.Sprintf("%d line(s) do not match the vendors", rep.Problems)
	if unchecked == 0 {
		return s
	}
	s += fmt.Sprintf(", of which %d op(s) could not be checked", unchecked)
	for _, u := range rep.Unavailable {
		s += "; " + u.Reason
	}
	if len(rep.Unavailable) == 0 {
		s += " (their vendor is not configured in this process)"
	}
	return s
}

// parseTime reads RFC 3339 or a date (midnight UTC).
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", s)
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// printTotals prints the matched ops' totals per tool and currency, then the matched
// refunds netted against the matched payments per currency.
func printTotals(w io.Writer, rep *finance.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tCURRENCY\tCOUNT\tAMOUNT")
	for _, t := range rep.Totals {
		amount := "—"
		if t.Currency != "" {
			amount = money.Format(t.Amount, t.Currency)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.Tool, t.Currency, t.Count, amount)
	}
	if len(rep.Totals) == 0 {
		fmt.Fprintln(tw, "(no matched op)\t\t\t")
	}
	if err := tw.Flush(); err != nil || len(rep.Nets) == 0 {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENCY\tPAID\tREFUNDED\tNET")
	for _, n := range rep.Nets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Currency, money.Format(n.Paid, n.Currency), money.Format(n.Refunded, n.Currency),
			money.Format(n.Net, n.Currency))
	}
	return tw.Flush()
}

// printProblems prints the lines that do not match, with their amounts.
func printProblems(w io.Writer, rep *finance.Report) error {
	if rep.Problems == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nProblems:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tKEY\tTOOL\tSTATUS\tVENDOR IDS\tOP AMOUNT\tVENDOR AMOUNT\tDETAIL")
	for _, l := range rep.Lines {
		if l.Category == finance.CategoryMatched {
			continue
		}
		key := l.Key
		if key == "" {
			key = l.OpID
		}
		opAmount, vendorAmount := "—", "—"
		switch {
		case l.FullRefund && l.PaymentAmount != 0:
			opAmount = "full refund of a " + money.Format(l.PaymentAmount, l.OpCurrency) + " payment"
		case l.FullRefund:
			opAmount = "full refund"
		case l.OpCurrency != "":
			opAmount = money.Format(l.OpAmount, l.OpCurrency)
		}
		if l.VendorCurrency != "" {
			vendorAmount = money.Format(l.VendorAmount, l.VendorCurrency)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Category, key, l.Tool, l.OpStatus, strings.Join(l.VendorIDs, " "),
			opAmount, vendorAmount, l.Detail)
	}
	return tw.Flush()
}

// printReportSummary prints the finance report for a person: the window, the totals per
// tool and currency, and the lines that do not match; --format csv or json give every
// line.
func printReportSummary(w io.Writer, rep *finance.Report) error {
	matched := len(rep.Lines) - rep.Problems
	fmt.Fprintf(w, "Finance report from %s up to %s (not included): %d matched line(s), %d problem(s).\n\n",
		rep.Since.UTC().Format(time.RFC3339), rep.Until.UTC().Format(time.RFC3339), matched, rep.Problems)
	for _, u := range rep.Unavailable {
		fmt.Fprintf(w, "Not checked: %s\n\n", u.Reason)
	}
	if err := printTotals(w, rep); err != nil {
		return err
	}
	if err := printProblems(w, rep); err != nil {
		return err
	}
	for _, c := range []struct {
		what   string
		counts map[string]int
	}{{"vendor objects without an oncebox tag (ignored)", rep.Untagged}, {"ops not compared with the vendor (unchecked)", rep.Unchecked},
		{"ops that could not be compared (vendor cannot list)", rep.Unlistable}, {"vendor events naming no op", rep.OrphanEvents}} {
		for _, vendor := range slices.Sorted(maps.Keys(c.counts)) {
			fmt.Fprintf(w, "%s: %d %s\n", vendor, c.counts[vendor], c.what)
		}
	}
	fmt.Fprintln(w, "\nEvery line: --format csv or --format json; the totals as CSV: --format totals-csv.")
	return nil
}
