package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/mcpupstream"
)

// upstreamConn is an upstream's session with the definition it was opened from: a
// reload keeps the session of an upstream whose definition did not change.
type upstreamConn struct {
	up *Upstream
	*mcpupstream.Session
}

// newUpstreamConn opens (lazily) the session of up.
func newUpstreamConn(up *Upstream, opts Options) *upstreamConn {
	client := opts.HTTPClient
	if up.egress != nil {
		client = &http.Client{Transport: up.egress.Transport()}
	}
	return &upstreamConn{up: up, Session: mcpupstream.New(mcpupstream.Config{
		Name: up.Name, URL: up.URL, Headers: up.Headers, Command: up.Command, Args: up.Args, Env: up.Env, Vars: up.vars,
		Rate: up.Rate, Burst: up.Burst, MaxResultBytes: up.MaxResultBytes,
		Timeout: opts.Timeout, HTTPClient: client, Logger: opts.Logger, Observer: opts.Observer, OnToolsChanged: opts.OnToolsChanged,
	})}
}

// connectUpstreams opens every upstream, lists its tools and adds them to the
// catalog.
func (r *Runtime) connectUpstreams(ctx context.Context, opts Options) error {
	r.upstreams, r.kept, r.parked = map[string]*upstreamConn{}, map[string]bool{}, map[string]*upstreamConn{}
	if prev := opts.Previous; prev != nil {
		for name, c := range prev.parked {
			r.parked[name] = c
		}
		for name, c := range prev.upstreams {
			r.parked[name] = c
		}
	}
	for _, name := range r.cat.UpstreamNames() {
		up := r.cat.Upstreams[name]
		conn, ok := r.parked[name]
		if ok && reflect.DeepEqual(*conn.up, *up) {
			r.kept[name] = true
		} else {
			conn = newUpstreamConn(up, opts)
		}
		delete(r.parked, name)
		r.upstreams[name] = conn
		listed, err := conn.List(ctx)
		if err != nil {
			r.Close()
			return &Error{File: r.cat.fileOf(up.Tenant), Kind: "upstream", Name: name, Message: "cannot list its tools: " + err.Error()}
		}
		if err := r.cat.addUpstreamTools(up, listed); err != nil {
			r.Close()
			return err
		}
	}
	return nil
}

// Close closes the upstreams' sessions (and ends stdio upstreams' processes) that r
// opened itself: those kept from Options.Previous belong to the runtime in force.
func (r *Runtime) Close() {
	for name, c := range r.upstreams {
		if !r.kept[name] {
			c.Close()
		}
	}
}

// closeAll closes every upstream session r holds, kept and parked ones included.
func (r *Runtime) closeAll() {
	for _, c := range r.upstreams {
		c.Close()
	}
	for _, c := range r.parked {
		c.Close()
	}
}

// retire ends the sessions of cur that next does not hold: an upstream that changed
// is closed for good, one the file no longer names is parked (its process ended,
// opened again only to send an op accepted before).
func retire(cur, next *Runtime) {
	holds := func(c *upstreamConn) bool {
		for _, n := range next.upstreams {
			if n == c {
				return true
			}
		}
		return false
	}
	for _, m := range []map[string]*upstreamConn{cur.upstreams, cur.parked} {
		for name, c := range m {
			switch {
			case holds(c):
			case next.parked[name] == c:
				c.Rest()
			default:
				c.Close()
			}
		}
	}
}

// readUpstream forwards a read tool's call and returns the upstream's
// CallToolResult as JSON.
func (r *Runtime) readUpstream(ctx context.Context, t *Tool, args json.RawMessage) (json.RawMessage, error) {
	m, err := upstreamArgs(t, args, "")
	if err != nil {
		return nil, &vendorapi.ValidationError{Field: "args", Message: err.Error()}
	}
	res, err := r.upstreams[t.Upstream].Read(ctx, t.UpstreamTool, m)
	if err != nil {
		return nil, &ReadError{Code: "upstream_error", Message: err.Error()}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, &ReadError{Code: "upstream_error", Message: err.Error()}
	}
	return b, nil
}

// upstreamVendor dispatches the ops of one upstream's write and unsafe tools with
// tools/call.
type upstreamVendor struct {
	name string
	// current returns the runtime in force: its catalog defines the upstream's tools
	// and its session calls them.
	current func() *Runtime
	// conn is the upstream's session when the vendor was made, used once a reload has
	// dropped the upstream from the file.
	conn *upstreamConn
	lag  time.Duration
}

// session is the upstream's session in force.
func (v *upstreamVendor) session() *upstreamConn {
	r := v.current()
	if c, ok := r.upstreams[v.name]; ok {
		return c
	}
	if c, ok := r.parked[v.name]; ok {
		return c
	}
	return v.conn
}

var _ vendorapi.Vendor = (*upstreamVendor)(nil)

// Name returns "catalog_<upstream>".
func (v *upstreamVendor) Name() string { return VendorPrefix + v.name }

// Idempotency is the upstream's native_keys and native_window.
func (v *upstreamVendor) Idempotency() vendorapi.Idempotency {
	up := v.conn.up
	return vendorapi.Idempotency{Native: up.NativeKeys, Window: up.NativeWindow}
}

// Throttle takes a slot of the upstream's rate limit (shared by every call of this
// process) for the op about to be claimed, or says how long to wait for one: the
// worker then snoozes the job without claiming the op, sending or counting an attempt
// (vendorapi.Throttler).
func (v *upstreamVendor) Throttle() time.Duration { return v.session().Throttle() }

// Queue is the upstream's workers and job timeout (zero fields: the server's defaults
// for catalog targets).
func (v *upstreamVendor) Queue() dispatch.QueueConfig {
	return dispatch.QueueConfig{MaxWorkers: v.conn.up.Workers, JobTimeout: v.conn.up.JobTimeout}
}

// LookupLag is the catalog's lookup lag.
func (v *upstreamVendor) LookupLag() time.Duration { return v.lag }

// Dispatch calls the upstream tool, as it was defined when the op was accepted
// (p.Definition: its name upstream and tag argument; an op stored without one is sent
// as the catalog in force defines its tool), with the op's id and key in _meta (and
// the op id in the tag argument); mcpupstream.Session.Dispatch classifies the answer.
func (v *upstreamVendor) Dispatch(ctx context.Context, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	t := v.current().cat.Tools[p.Tool]
	var head struct {
		Upstream string `json:"upstream"`
	}
	// A definition without "upstream" was stored before upstream tools kept theirs:
	// such an op is sent as the catalog in force defines its tool.
	if len(p.Definition) > 0 && json.Unmarshal(p.Definition, &head) == nil && head.Upstream != "" {
		var err error
		if t, err = parseDefinition(p.Tool, p.Definition); err != nil {
			return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_definition", Message: err.Error(), Err: err}
		}
	}
	if t == nil || t.Upstream != v.name {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "unknown_tool",
			Message: fmt.Sprintf("tool %q is no longer offered by upstream %q", p.Tool, v.name)}
	}
	args, err := upstreamArgs(t, p.Args, p.OpID)
	if err != nil {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_args", Message: err.Error(), Err: err}
	}
	return v.session().Dispatch(ctx, mcpupstream.DispatchParams{OpID: p.OpID, Key: p.VendorKey, Tool: t.UpstreamTool, Args: args})
}

// Lookup calls the tool's lookup tool with the op id (mcpupstream.Session.Lookup).
// Without a lookup tool the upstream cannot be asked (vendorapi.ErrLookupUnavailable).
func (v *upstreamVendor) Lookup(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	t, ok := v.current().cat.Tools[p.Tool]
	if !ok || t.Upstream != v.name {
		return nil, fmt.Errorf("tool %q is not offered by upstream %s: %w", p.Tool, v.name, vendorapi.ErrLookupUnavailable)
	}
	if t.LookupTool == "" {
		return nil, fmt.Errorf("upstream tool %s has no lookup_tool in the catalog, so its objects cannot be looked up: %w",
			t.UpstreamTool, vendorapi.ErrLookupUnavailable)
	}
	return v.session().Lookup(ctx, t.LookupTool, t.LookupArgument, p.OpID)
}

// Health reports each upstream's session, by upstream name.
func (r *Runtime) Health() map[string]mcpupstream.Health {
	out := make(map[string]mcpupstream.Health, len(r.upstreams))
	for name, c := range r.upstreams {
		out[name] = c.Health()
	}
	return out
}

// Relist lists an upstream's tools again (it announced
// notifications/tools/list_changed) and returns a runtime like r whose catalog offers
// them in place of the ones listed before, checked as at start. It shares r's
// targets and sessions; r is unchanged. Make it the catalog in force with Live.Swap.
func (r *Runtime) Relist(ctx context.Context, upstream string) (*Runtime, error) {
	conn, ok := r.upstreams[upstream]
	if !ok {
		return nil, &Error{File: r.cat.File, Kind: "upstream", Name: upstream, Message: "is not in the catalog in force"}
	}
	listed, err := conn.List(ctx)
	if err != nil {
		return nil, &Error{File: r.cat.fileOf(conn.up.Tenant), Kind: "upstream", Name: upstream, Message: "cannot list its tools: " + err.Error()}
	}
	cat := &Catalog{File: r.cat.File, Targets: r.cat.Targets, Upstreams: r.cat.Upstreams, Tools: map[string]*Tool{},
		tenantFiles: r.cat.tenantFiles, reserved: r.cat.reserved}
	for name, t := range r.cat.Tools {
		if t.Upstream != upstream {
			cat.Tools[name] = t
		}
	}
	if err := cat.addUpstreamTools(conn.up, listed); err != nil {
		return nil, err
	}
	if err := cat.checkViews(); err != nil {
		return nil, err
	}
	next := *r
	next.cat = cat
	return &next, nil
}
