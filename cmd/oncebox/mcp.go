package main

import (
	"context"
	"errors"
	"flag"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/server"
)

// runMCP is `oncebox mcp --tenant T`: the MCP tools over stdio, those of /mcp
// (--tools-file's catalog and upstream tools included, with no built-in vendor needed
// then). This process records ops and answers read tools; `oncebox serve` dispatches
// the ops. It stops on the end of its standard input or on SIGINT or SIGTERM, ending
// the upstream programs it started.
func runMCP(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant whose ops the tools create")
	conversation := fs.String("conversation", "", "conversation of calls that name none in _meta (default: none; identical calls are then one op within the tool's --mcp-dedupe-window, across restarts)")
	cfg, logger, err := parseServerArgsFor(fs, args, showOnly(cellSettings, vendorSettings, governanceSettings, recordSettings))
	if err != nil {
		return err
	}
	if err := inTenantCell(ctx, &cfg, *tenantName); err != nil {
		return err
	}
	cfg.Roles = server.Roles{API: true}
	if cfg.StripeAPIKey == "" && cfg.SendGridAPIKey == "" && len(cfg.WebhookTargets) == 0 && cfg.ToolsFile == "" && cfg.TenantCatalogs == "" {
		return &exitError{code: 2, err: errNoVendor()}
	}
	stopTracing, err := setupTracing(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.SeedPolicy(ctx); err != nil {
		return err
	}
	tid, err := tenantID(ctx, srv, *tenantName)
	if err != nil {
		return err
	}
	// The tools of /mcp, the catalog's and the upstreams' included; the upstream
	// programs it started end with it (srv.Close, on stdin's end or a signal).
	m, err := srv.StdioMCP(*conversation)
	if errors.Is(err, mcpserver.ErrNoTools) {
		return &exitError{code: 2, err: errNoVendor()}
	}
	if err != nil {
		return err
	}
	return m.RunStdio(ctx, tid)
}

// errNoVendor is what `oncebox mcp` says when no vendor is configured.
func errNoVendor() error {
	return errors.New("no tool is enabled: set STRIPE_API_KEY (payments, refunds), SENDGRID_API_KEY (mail) " +
		"or ONCEBOX_WEBHOOK_TARGETS (webhooks), as for oncebox serve")
}
