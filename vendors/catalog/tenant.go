package catalog

import "fmt"

// TenantCatalog is one tenant's own catalog, to be merged beside the installation's
// (Merge).
type TenantCatalog struct {
	// Tenant is the tenant's name; ID its id.
	Tenant string
	ID     int64
	// Catalog is the tenant's file, loaded and checked like the installation's.
	Catalog *Catalog
}

// Merge returns the catalog of an installation: base (nil for none; then file names
// it in errors) with each tenant's own catalog beside it, every tool, target and
// upstream marked with its tenant. A tenant's tools reach only its own targets and
// upstreams (each file is checked alone), and only that tenant sees and calls them.
// Names are one namespace: a tenant's tool, target or upstream whose name base,
// reserved (the tools registered besides any catalog) or an earlier tenant's catalog
// already holds is refused, an *Error naming the tenant's file and the tool (the
// outbox's registry and the dispatch queues are the installation's). The MCP names
// of the tools are checked per tenant view by Connect, once the upstreams' tools are
// listed: each tenant sees the reserved tools, the installation's and its own.
func Merge(file string, base *Catalog, tenants []TenantCatalog, reserved []string) (*Catalog, error) {
	out := &Catalog{File: file, Targets: map[string]*Target{}, Tools: map[string]*Tool{}, Upstreams: map[string]*Upstream{},
		tenantFiles: map[string]string{}, reserved: reserved}
	// Who took each tool name, and each target or upstream name (they share one:
	// each is a vendor and a queue), for the errors.
	tools, ends := map[string]string{}, map[string]string{}
	for _, name := range reserved {
		tools[name] = "a built-in tool"
	}
	if base != nil {
		out.File = base.File
		add(out, base, "", 0)
		note(base, "the installation's catalog ("+base.File+")", tools, ends)
	}
	for _, tc := range tenants {
		c := tc.Catalog
		for _, name := range c.Names() {
			if by, taken := tools[name]; taken {
				return nil, &Error{File: c.File, Kind: "tool", Name: name,
					Message: by + " has a tool of this name: a tenant's tool may not shadow it (tool names are one namespace across the installation)"}
			}
		}
		for _, e := range append(sortedKeys(c.Targets), c.UpstreamNames()...) {
			if by, taken := ends[e]; taken {
				kind := "target"
				if c.Upstreams[e] != nil {
					kind = "upstream"
				}
				return nil, &Error{File: c.File, Kind: kind, Name: e,
					Message: by + " has a target or upstream of this name (each is its own dispatch queue): choose another name"}
			}
		}
		out.tenantFiles[tc.Tenant] = c.File
		add(out, c, tc.Tenant, tc.ID)
		note(c, fmt.Sprintf("tenant %s's catalog (%s)", tc.Tenant, c.File), tools, ends)
	}
	return out, nil
}

// add copies c's tools, targets and upstreams into out, marked with the tenant.
func add(out, c *Catalog, tenant string, id int64) {
	for name, t := range c.Tools {
		t.Tenant, t.TenantID = tenant, id
		out.Tools[name] = t
	}
	for name, t := range c.Targets {
		t.Tenant = tenant
		out.Targets[name] = t
	}
	for name, u := range c.Upstreams {
		u.Tenant, u.TenantID = tenant, id
		out.Upstreams[name] = u
	}
}

// note records c's names as taken by who.
func note(c *Catalog, who string, tools, ends map[string]string) {
	for name := range c.Tools {
		tools[name] = who
	}
	for name := range c.Targets {
		ends[name] = who
	}
	for name := range c.Upstreams {
		ends[name] = who
	}
}

// fileOf is the file that declares what tenant's catalog holds: the tenant's own
// file, or the installation's for "".
func (c *Catalog) fileOf(tenant string) string {
	if f, ok := c.tenantFiles[tenant]; ok && tenant != "" {
		return f
	}
	return c.File
}

// TenantOf returns the tenant whose own catalog declares the tool or upstream name,
// "" for the installation's or a name the catalog does not hold.
func (c *Catalog) TenantOf(name string) string {
	if t, ok := c.Tools[name]; ok {
		return t.Tenant
	}
	if u, ok := c.Upstreams[name]; ok {
		return u.Tenant
	}
	return ""
}
