package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// readCatalogs reads --tools-file (if set) and the tenants' own catalogs of
// --tenant-catalogs (if set), each checked alone, and merges them: a tenant's tools
// are that tenant's only, and may not shadow another tool (catalog.Merge).
func (s *Server) readCatalogs(ctx context.Context) (*catalog.Catalog, error) {
	var base *catalog.Catalog
	if s.cfg.ToolsFile != "" {
		var err error
		if base, err = catalog.Load(s.cfg.ToolsFile, nil); err != nil {
			return nil, err
		}
	}
	tenants, err := s.readTenantCatalogs(ctx)
	if err != nil {
		return nil, err
	}
	// The tools offered besides the catalogs: the configured ones and, on a reload,
	// the built-in tools of the enabled vendors (at start mcpserver checks those).
	reserved := map[string]bool{}
	for _, t := range s.cfg.Tools {
		reserved[t.Tool.Name] = true
	}
	for _, t := range s.baseTools {
		reserved[t.Name] = true
	}
	return catalog.Merge(s.cfg.ToolsFile, base, tenants, slices.Sorted(maps.Keys(reserved)))
}

// readTenantCatalogs loads every <tenant>.yaml of --tenant-catalogs, sorted by name.
// A file whose name is no tenant's is refused: it would be offered to no one.
func (s *Server) readTenantCatalogs(ctx context.Context) ([]catalog.TenantCatalog, error) {
	dir := s.cfg.TenantCatalogs
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &catalog.Error{File: dir, Message: fmt.Sprintf("cannot read the folder of tenant catalogs (--tenant-catalogs): %v", err)}
	}
	conf, err := s.confinement(ctx)
	if err != nil {
		return nil, err
	}
	var out []catalog.TenantCatalog
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok || e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		t, err := s.tenants.ByName(ctx, name)
		if errors.Is(err, tenant.ErrNotFound) {
			return nil, &catalog.Error{File: file, Message: fmt.Sprintf("no tenant is named %q: the file's name, less .yaml, names the tenant whose catalog it is (oncebox tenant create %s)", name, name)}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		cat, err := catalog.LoadTenant(file, t.Name, conf, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, catalog.TenantCatalog{Tenant: t.Name, ID: t.ID, Catalog: cat})
	}
	slices.SortFunc(out, func(a, b catalog.TenantCatalog) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out, nil
}

// confinement is what a tenant's own catalog may reach: --tenant-upstream-commands,
// --tenant-egress-allow, and every tenant's name (a file reads no other tenant's
// variables).
func (s *Server) confinement(ctx context.Context) (catalog.Confinement, error) {
	all, err := s.tenants.List(ctx)
	if err != nil {
		return catalog.Confinement{}, fmt.Errorf("tenant catalogs: %w", err)
	}
	conf := catalog.Confinement{Commands: s.cfg.TenantUpstreamCommands, EgressAllow: s.cfg.TenantEgressAllow}
	for _, t := range all {
		conf.Tenants = append(conf.Tenants, t.Name)
	}
	return conf, nil
}

// catalogFiles names, for log lines, what a reload reads: --tools-file and
// --tenant-catalogs.
func (s *Server) catalogFiles() string {
	files := []string{}
	if s.cfg.ToolsFile != "" {
		files = append(files, s.cfg.ToolsFile)
	}
	if s.cfg.TenantCatalogs != "" {
		files = append(files, s.cfg.TenantCatalogs+"/*.yaml")
	}
	return strings.Join(files, " ")
}
