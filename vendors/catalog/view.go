package catalog

import (
	"fmt"
	"strings"
)

// MCPName is the name MCP clients see for the oncebox tool name: its dots become
// underscores, since some clients accept no dot ("helpdesk.create_ticket" is
// "helpdesk_create_ticket").
func MCPName(tool string) string { return strings.ReplaceAll(tool, ".", "_") }

// checkViews checks the tool names each tenant sees, over HTTP and MCP alike: the
// built-in tools (reserved), the installation's tools and the tenant's own. Two tools
// of one view may not share an MCP name (helpdesk.ticket and helpdesk_ticket): the
// clients could not tell them apart. A collision is an *Error naming the file of the
// later tool (a tenant's before the installation's), the tool and the one it collides
// with. Tools of two tenants never meet in a view, so their MCP names may be equal.
// Call it on the whole catalog, upstream tools listed, before it is put in force.
func (c *Catalog) checkViews() error {
	shared := map[string]string{} // MCP name → oncebox name, in every view
	who := map[string]string{}
	for _, name := range c.reserved {
		shared[MCPName(name)], who[name] = name, "a built-in tool"
	}
	own := map[string][]string{} // tenant → its own tools, sorted
	for _, name := range c.Names() {
		if t := c.Tools[name]; t.Tenant != "" {
			own[t.Tenant] = append(own[t.Tenant], name)
			continue
		}
		if err := c.claim(shared, who, name, "the installation's tool"); err != nil {
			return err
		}
	}
	for _, tenant := range sortedKeys(own) {
		view := make(map[string]string, len(shared)+len(own[tenant]))
		for k, v := range shared {
			view[k] = v
		}
		for _, name := range own[tenant] {
			if err := c.claim(view, who, name, "tenant "+tenant+"'s tool"); err != nil {
				return err
			}
		}
	}
	return nil
}

// claim adds the tool name to a view (MCP name → oncebox name), refusing it when the
// view holds another tool of the same MCP name; who says whose each tool is.
func (c *Catalog) claim(view, who map[string]string, name, whose string) error {
	m := MCPName(name)
	if other, taken := view[m]; taken && other != name {
		return &Error{File: c.fileOf(c.Tools[name].Tenant), Kind: "tool", Name: name,
			Message: fmt.Sprintf("MCP clients see it as %q, as %s %q that the same tenant sees: rename one (tool names that differ only in dots and underscores are one name over MCP)",
				m, who[other], other)}
	}
	view[m], who[name] = name, whose
	return nil
}

// FileOf returns the file that declares the tool name: its tenant's own catalog, or
// the installation's.
func (c *Catalog) FileOf(name string) string {
	if t, ok := c.Tools[name]; ok {
		return c.fileOf(t.Tenant)
	}
	return c.File
}
