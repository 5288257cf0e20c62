package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// ErrNoCatalog is ReloadCatalog's answer when the server runs without --tools-file
// and --tenant-catalogs.
var ErrNoCatalog = errors.New("no tool catalog to reload: oncebox runs without --tools-file and --tenant-catalogs")

// ReloadCatalog reads --tools-file and the tenants' own catalogs (--tenant-catalogs)
// again and, when every file loads and checks, makes them the
// catalog in force for the API (POST /v1/ops, GET /v1/tools), MCP (each session's
// tool list, with notifications/tools/list_changed) and the dispatch workers, without
// stopping anything: calls in progress finish under the catalog they started with,
// and every op already accepted is sent as its tool was defined when it was accepted
// (its stored catalog.Definition), never validated or routed again. A catalog that
// does not load or check (every tenant's view of tool names included, HTTP and MCP
// alike) is refused whole with one log line naming the file, the tool or target and
// the field, and the catalog in force stays for the API and MCP alike; the error is
// returned too.
// `oncebox serve` calls it on SIGHUP.
func (s *Server) ReloadCatalog(ctx context.Context) error {
	if s.catalog == nil {
		return ErrNoCatalog
	}
	s.reloading.Lock()
	defer s.reloading.Unlock()
	err := s.reloadCatalog(ctx)
	if err != nil {
		s.logger.Error("tool catalog not reloaded, the catalog in force stays: "+err.Error(), slog.String("file", s.catalogFiles()))
		return err
	}
	return nil
}

func (s *Server) reloadCatalog(ctx context.Context) (err error) {
	rt, err := s.connectCatalog(ctx)
	if err != nil {
		return err
	}
	if err := s.install(rt); err != nil {
		rt.Close()
		return err
	}
	s.logCatalog("tool catalog reloaded", rt)
	return nil
}

// relistUpstream makes the catalog in force offer an upstream's tools as it lists
// them now: it announced notifications/tools/list_changed. The API, MCP (whose
// clients are told their list changed) and the workers get them as on a reload; ops
// already accepted keep the definition they were accepted with. A list that does not
// check (a tool the file configures is gone, a new write tool on an upstream that had
// no queue) is refused with one log line, and the catalog in force stays.
func (s *Server) relistUpstream(ctx context.Context, upstream string) error {
	s.reloading.Lock()
	defer s.reloading.Unlock()
	rt, err := s.catalog.Current().Relist(ctx, upstream)
	if err == nil {
		err = s.install(rt) // rt shares the sessions in force: never closed here
	}
	if err != nil {
		s.logger.Error("upstream changed its tools, but the catalog in force stays: "+err.Error(),
			slog.String("upstream", upstream), slog.String("file", s.catalogFiles()))
		return err
	}
	s.logCatalog("upstream tools listed again", rt, slog.String("upstream", upstream))
	return nil
}

// install makes rt the catalog in force for the outbox's registry, the API and MCP,
// unless it cannot be (then nothing changes).
func (s *Server) install(rt *catalog.Runtime) error {
	// An upstream tool the new list or file would loosen keeps its definition in force.
	for _, l := range s.catalog.Tighten(rt) {
		s.logger.Error(l.String(), slog.String("upstream", l.Upstream), slog.String("tool", l.Tool),
			slog.String("class", l.From), slog.String("refused_class", l.To), slog.Bool("approval_dropped", l.ApprovalDropped))
		if s.metrics != nil {
			s.metrics.UpstreamToolLooseningRefused(l.Upstream, l.Tool)
		}
	}
	next, extra, windows, err := s.check(rt)
	if err != nil {
		return err
	}
	if err := s.catalog.Swap(rt); err != nil {
		return err
	}
	if err := s.registry.Replace(next...); err != nil {
		// Checked (s.check): cannot happen.
		s.logger.Error("tool catalog reloaded, but the outbox keeps its former tools: "+err.Error(), slog.String("file", s.catalogFiles()))
		return nil
	}
	if s.api != nil {
		s.api.SetTools(s.toolInfos())
	}
	if s.mcp != nil {
		if err := s.mcp.SetTools(extra, windows); err != nil {
			// Checked (s.check): cannot happen.
			s.logger.Error("tool catalog reloaded, but MCP keeps its former tool list: "+err.Error(), slog.String("file", s.catalogFiles()))
		} else {
			s.logNoWindow()
		}
	}
	return nil
}

// check returns what rt makes of the outbox's registry and of MCP's tool lists, or
// why rt cannot be put in force, naming the file: the registry, the tools' key
// windows and every tenant's MCP view are checked before anything changes, so that a
// reload is applied whole (registry, API, MCP) or not at all.
func (s *Server) check(rt *catalog.Runtime) ([]vendorapi.Tool, []mcpserver.ExtraTool, map[string]time.Duration, error) {
	var next []vendorapi.Tool
	if !s.cfg.ReadOnly {
		next = append(slices.Clone(s.baseTools), rt.Tools(s.cfg.TTL)...)
	}
	reg, err := outbox.NewRegistry(next...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", s.catalogFiles(), err)
	}
	// A tool kept for less than its target's key window is refused, as at start.
	for _, v := range s.catalog.Vendors() {
		idem := v.Idempotency()
		if !idem.Native {
			continue
		}
		for _, t := range next {
			if t.Vendor == v.Name() && t.TTL > 0 && t.TTL < idem.Window {
				return nil, nil, nil, &catalog.Error{File: rt.Catalog().FileOf(t.Name), Kind: "tool", Name: t.Name, Field: "ttl",
					Message: fmt.Sprintf("keeps its ops %s, less than the target's idempotency key window of %s: a retry after the purge would be sent again", t.TTL, idem.Window)}
			}
		}
	}
	extra, windows := s.catalogMCPOf(rt)
	if s.mcp != nil {
		if err := s.mcp.CheckTools(extra, windows, reg); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", s.catalogFiles(), err)
		}
	}
	return next, extra, windows, nil
}

// logCatalog logs the version of each tool of rt.
func (s *Server) logCatalog(msg string, rt *catalog.Runtime, attrs ...any) {
	versions := make([]any, 0, len(rt.Catalog().Tools))
	for _, name := range rt.Catalog().Names() {
		versions = append(versions, slog.String(name, rt.Catalog().Tools[name].Version))
	}
	s.logger.Info(msg, append([]any{slog.String("file", s.catalogFiles()), slog.Group("versions", versions...)}, attrs...)...)
}
