package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"
)

// runHealthcheck is `oncebox healthcheck`: exit 0 when the server answers /healthz (for a
// container's HEALTHCHECK). It takes the global flags like every command and uses none.
func runHealthcheck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "health endpoint")
	addGlobalFlags(fs)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", *url, resp.Status)
	}
	return nil
}
