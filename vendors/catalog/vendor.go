package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/mcpupstream"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// Options configure how a catalog's targets are reached.
type Options struct {
	// Timeout bounds each request to a target, a read tool's call included. Defaults
	// to 10 seconds.
	Timeout time.Duration
	// LookupLag is how long an object may stay invisible to a target's lookup path.
	// Defaults to 5 seconds.
	LookupLag time.Duration
	// HTTPClient sends the requests (see webhook.Config.HTTPClient), but those of a
	// tenant's targets and upstreams, which go through their egress policy
	// (LoadTenant). Optional.
	HTTPClient *http.Client
	// Logger receives the adapter's debug records. Optional.
	Logger *slog.Logger
	// Context bounds connecting to the upstream MCP servers and listing their tools
	// (each step also bounded by Timeout). Optional.
	Context context.Context
	// Observer is told about upstream calls and sessions. Optional.
	Observer Observer
	// OnToolsChanged is called with an upstream's name when it announces that its
	// tools changed (notifications/tools/list_changed). Optional: without it the
	// announcements are not listened to.
	OnToolsChanged func(upstream string)
	// RedactKey keys the hashes that replace redacted fields (HMAC-SHA256); nil makes
	// them plain SHA-256. Optional.
	RedactKey []byte
	// Previous is the runtime in force, on a reload: an upstream whose definition in
	// the file is unchanged keeps its session (and a stdio upstream its process)
	// instead of being connected again. Live.Swap ends those of Previous the new
	// runtime does not keep. Optional.
	Previous *Runtime
}

// Observer is told about upstream MCP calls and sessions (mcpupstream.Observer),
// and about tools a relist or reload would have loosened, for metrics. Its methods
// must be quick and safe for concurrent use.
type Observer interface {
	mcpupstream.Observer
	// UpstreamToolLooseningRefused is called when a relist or reload would have
	// loosened an upstream tool and it kept its definition in force (Live.Tighten);
	// tool is its oncebox name.
	UpstreamToolLooseningRefused(upstream, tool string)
}

type nopObserver struct{}

func (nopObserver) UpstreamCalled(string, string, string, time.Duration) {}
func (nopObserver) UpstreamConnected(string, bool)                       {}
func (nopObserver) UpstreamRestarted(string)                             {}
func (nopObserver) UpstreamRateLimited(string)                           {}
func (nopObserver) UpstreamToolLooseningRefused(string, string)          {}

// Runtime is a catalog connected to its targets: the outbox tools and vendors of its
// write and unsafe tools, and the caller of its read tools.
type Runtime struct {
	cat       *Catalog
	targets   map[string]*webhook.Vendor
	upstreams map[string]*upstreamConn
	// kept names the upstreams whose sessions came from Options.Previous: Close
	// leaves them to the runtime in force.
	kept map[string]bool
	// parked are the sessions of upstreams a reload removed from the file, by name:
	// their processes are ended, and opened again only to send an op accepted before
	// the reload.
	parked    map[string]*upstreamConn
	lookupLag time.Duration
	opts      Options
}

// Connect builds one webhook adapter per target, and connects to every upstream MCP
// server: its tools are listed and added to the catalog. Close closes the upstreams.
func (c *Catalog) Connect(opts Options) (*Runtime, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.LookupLag == 0 {
		opts.LookupLag = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	r := &Runtime{cat: c, targets: map[string]*webhook.Vendor{}, lookupLag: opts.LookupLag, opts: opts}
	for name, t := range c.Targets {
		client := opts.HTTPClient
		if t.egress != nil {
			client = egressClient(t.egress, opts)
		}
		v, err := webhook.New(webhook.Config{
			Targets:           map[string]webhook.Target{name: {BaseURL: t.BaseURL, SecretHeader: t.SecretHeader, Secret: t.Secret}},
			Timeout:           opts.Timeout,
			HTTPClient:        client,
			NativeIdempotency: t.NativeKeys,
			LookupPath:        t.LookupPath,
			LookupLag:         opts.LookupLag,
			Logger:            opts.Logger,
		})
		if err != nil {
			return nil, &Error{File: c.fileOf(t.Tenant), Kind: "target", Name: name, Message: err.Error()}
		}
		r.targets[name] = v
	}
	if err := r.connectUpstreams(opts.Context, opts); err != nil {
		return nil, err
	}
	if err := c.checkViews(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Catalog returns the catalog r was connected from.
func (r *Runtime) Catalog() *Catalog { return r.cat }

// Tools returns the outbox tools of the catalog's write and unsafe tools: unsafe ones
// always need approval. A tool without a TTL gets defaultTTL.
func (r *Runtime) Tools(defaultTTL time.Duration) []vendorapi.Tool {
	var out []vendorapi.Tool
	for _, name := range r.cat.Names() {
		t := r.cat.Tools[name]
		if t.Class == ClassRead {
			continue
		}
		ot := vendorapi.Tool{Name: t.Name, Vendor: VendorPrefix + t.Target, Validate: t.Validate, TTL: t.TTL,
			Definition: t.definitionJSON(), Identity: t.Identity, Tenant: t.TenantID}
		if len(t.Steps) > 0 {
			ot.Vendor, ot.Steps, ot.Definition = vendorapi.StepsVendor, t.Steps, nil
		}
		for _, o := range t.Owned {
			ot.Objects = append(ot.Objects, vendorapi.ObjectArg{Arg: o})
		}
		if ot.TTL == 0 {
			ot.TTL = defaultTTL
		}
		if t.Class == ClassUnsafe {
			ot.NeedsApproval = func(json.RawMessage) bool { return true }
		}
		if t.Redact != nil {
			ot.Redact = newRedactor(t.Redact.Args, r.opts.RedactKey)
			ot.RedactResult = newRedactor(t.Redact.Result, r.opts.RedactKey)
		}
		out = append(out, ot)
	}
	return out
}

// Approvals returns the approval rules the file sets, by tool name, for the
// process-wide default policy (governance.Config.Approvals): an unsafe tool without one
// waits always through its NeedsApproval.
func (r *Runtime) Approvals() governance.ApprovalPolicy {
	p := governance.ApprovalPolicy{}
	for name, t := range r.cat.Tools {
		if t.Approval != nil {
			p[name] = *t.Approval
		}
	}
	return p
}

// Vendors returns the outbox vendors of the targets that write or unsafe tools use.
func (r *Runtime) Vendors() []vendorapi.Vendor {
	return r.vendors(func() *Runtime { return r })
}

// vendors returns the vendors of the targets r's write and unsafe tools use, which
// send through the runtime current returns (r itself, or a Live's current one).
func (r *Runtime) vendors(current func() *Runtime) []vendorapi.Vendor {
	var out []vendorapi.Vendor
	for _, name := range sortedKeys(r.usedTargets()) {
		if conn, ok := r.upstreams[name]; ok {
			out = append(out, &upstreamVendor{name: name, current: current, conn: conn, lag: r.lookupLag})
			continue
		}
		out = append(out, &targetVendor{name: name, current: current, inner: r.targets[name]})
	}
	return out
}

// usedTargets is the set of targets that write or unsafe tools use: those with a
// vendor and a queue.
func (r *Runtime) usedTargets() map[string]bool {
	used := map[string]bool{}
	for _, t := range r.cat.Tools {
		if t.Class != ClassRead && len(t.Steps) == 0 {
			used[t.Target] = true
		}
	}
	return used
}

// ReadError is a read tool's call that did not answer 2xx: Code is the webhook
// adapter's (such as "http_4xx", "timeout", "not_sent").
type ReadError struct {
	Code    string
	Message string
}

// Error implements error.
func (e *ReadError) Error() string { return e.Code + ": " + e.Message }

// ErrNotRead is returned by Read for a tool that is not a read tool of the catalog.
var ErrNotRead = errors.New("not a read tool of the catalog")

// Read calls a read tool at once, with no op and no key, and returns the target's
// answer, {"status":<HTTP status>,"body":<JSON or text>}. Invalid arguments are an
// *vendorapi.ValidationError; a failed call a *ReadError.
func (r *Runtime) Read(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	t, ok := r.cat.Tools[name]
	if !ok || t.Class != ClassRead {
		return nil, fmt.Errorf("%q: %w", name, ErrNotRead)
	}
	if err := t.Validate(args); err != nil {
		return nil, err
	}
	if t.Upstream != "" {
		return r.readUpstream(ctx, t, args)
	}
	req, err := t.request(args)
	if err != nil {
		return nil, err
	}
	res, err := r.targets[t.Target].Dispatch(ctx, vendorapi.DispatchParams{Tool: name, Args: req, Attempt: 1})
	if err != nil {
		var de *vendorapi.DispatchError
		if errors.As(err, &de) {
			return nil, &ReadError{Code: de.Code, Message: de.Message}
		}
		return nil, &ReadError{Code: "failed", Message: err.Error()}
	}
	return res.Result, nil
}

// IsRead reports whether name is a read tool of the catalog.
func (r *Runtime) IsRead(name string) bool {
	t, ok := r.cat.Tools[name]
	return ok && t.Class == ClassRead
}

// targetVendor dispatches the ops of one target's write and unsafe tools through the
// webhook adapter.
type targetVendor struct {
	name string
	// current returns the runtime in force: its adapter for the target sends, and its
	// catalog defines ops stored without a definition.
	current func() *Runtime
	// inner is the target's adapter when the vendor was made, used once a reload has
	// dropped the target from the file (its waiting ops are still sent).
	inner *webhook.Vendor
}

// adapter is the target's adapter in force.
func (v *targetVendor) adapter() *webhook.Vendor {
	if a, ok := v.current().targets[v.name]; ok {
		return a
	}
	return v.inner
}

var _ vendorapi.Vendor = (*targetVendor)(nil)

// Name returns "catalog_<target>".
func (v *targetVendor) Name() string { return VendorPrefix + v.name }

// Idempotency is the target's native_keys.
func (v *targetVendor) Idempotency() vendorapi.Idempotency { return v.inner.Idempotency() }

// LookupLag is the adapter's.
func (v *targetVendor) LookupLag() time.Duration { return v.inner.LookupLag() }

// Dispatch sends the op's call to the target, as the tool was defined when the op was
// accepted (p.Definition); an op stored without a definition is sent as the catalog
// in force defines its tool.
func (v *targetVendor) Dispatch(ctx context.Context, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	var t *Tool
	if len(p.Definition) > 0 {
		var err error
		if t, err = parseDefinition(p.Tool, p.Definition); err != nil {
			return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_definition", Message: err.Error(), Err: err}
		}
	} else {
		t = v.current().cat.Tools[p.Tool]
	}
	if t == nil || t.Target != v.name {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "unknown_tool",
			Message: fmt.Sprintf("tool %q is no longer in the catalog for target %q", p.Tool, v.name)}
	}
	req, err := t.request(p.Args)
	if err != nil {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_args", Message: err.Error(), Err: err}
	}
	p.Args = req
	return v.adapter().Dispatch(ctx, p)
}

// Lookup asks the target's lookup path for the op's objects.
func (v *targetVendor) Lookup(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	p.Args = json.RawMessage(fmt.Sprintf(`{"target":%q}`, v.name))
	return v.adapter().Lookup(ctx, p)
}
