package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

const reconcileUsage = "usage: oncebox reconcile run | reconcile report --since T [--until T] [--tenant T] [--format csv|json]"

// runReconcile is `oncebox reconcile run` (one sweep now) and `oncebox reconcile report`
// (the finance report, read-only).
func runReconcile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	since := fs.String("since", "", "start of the window (RFC 3339 or YYYY-MM-DD)")
	until := fs.String("until", "", "end of the window, exclusive (RFC 3339 or YYYY-MM-DD; default now)")
	tenantName := fs.String("tenant", "", "only this tenant's ops")
	format := fs.String("format", "csv", "csv or json")
	cfg, logger, err := parseServerArgs(fs, args)
	if err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 {
		return &exitError{code: 2, err: errors.New(reconcileUsage)}
	}
	switch pos[0] {
	case "run":
		srv, err := offline(ctx, cfg, logger, false)
		if err != nil {
			return err
		}
		defer srv.Close()
		st, err := srv.Reconciler().SweepOnce(ctx)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(st)
		fmt.Println(string(b))
		return nil
	case "report":
		s, err := parseTime(*since)
		if err != nil || *since == "" {
			return &exitError{code: 2, err: fmt.Errorf("--since: want RFC 3339 or YYYY-MM-DD: %w", err)}
		}
		u := time.Now()
		if *until != "" {
			if u, err = parseTime(*until); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--until: %w", err)}
			}
		}
		if *format != "csv" && *format != "json" {
			return &exitError{code: 2, err: fmt.Errorf("--format %q: want csv or json", *format)}
		}
		srv, err := offline(ctx, cfg, logger, true)
		if err != nil {
			return err
		}
		defer srv.Close()
		var tid int64
		if *tenantName != "" {
			if tid, err = tenantID(ctx, srv, *tenantName); err != nil {
				return err
			}
		}
		rep, err := srv.Report(ctx, s, u, tid)
		if err != nil {
			return err
		}
		if *format == "json" {
			err = rep.WriteJSON(os.Stdout)
		} else {
			err = rep.WriteCSV(os.Stdout)
		}
		if err != nil {
			return err
		}
		if !rep.Clean() {
			unchecked := 0
			for _, n := range rep.Unchecked {
				unchecked += n
			}
			return &exitError{code: 1, err: fmt.Errorf("%d line(s) do not match, of which %d op(s) could not be checked (their vendor is not configured in this process)",
				rep.Problems, unchecked)}
		}
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown reconcile command %q (%s)", pos[0], reconcileUsage)}
}

// parseTime reads RFC 3339 or a date (midnight UTC).
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", s)
}
