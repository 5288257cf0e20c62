package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/mcpupstream"
)

// Live is the catalog in force in a process, swapped whole by Swap (on a reload):
// read tools, the outbox vendors of its targets and whoever lists its tools read the
// runtime in force through Current. Its vendors are made once, from the first
// runtime: a River queue per target cannot come or go while the process runs.
type Live struct {
	cur atomic.Pointer[Runtime]
	// closeMu orders Swap and Close; closed says Close was called.
	closeMu sync.Mutex
	closed  bool
	vendors []vendorapi.Vendor
	// queued is the set of targets that have a vendor (and a queue).
	queued map[string]bool
}

// NewLive makes r the catalog in force.
func NewLive(r *Runtime) *Live {
	l := &Live{queued: r.usedTargets()}
	l.cur.Store(r)
	l.vendors = r.vendors(l.Current)
	return l
}

// Current returns the runtime in force.
func (l *Live) Current() *Runtime { return l.cur.Load() }

// Vendors returns the outbox vendors of the first runtime's targets that write or
// unsafe tools use; they send through the runtime in force.
func (l *Live) Vendors() []vendorapi.Vendor { return l.vendors }

// Read calls a read tool of the catalog in force (see Runtime.Read).
func (l *Live) Read(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return l.Current().Read(ctx, name, args)
}

// IsRead reports whether name is a read tool of the catalog in force.
func (l *Live) IsRead(name string) bool { return l.Current().IsRead(name) }

// IsReadFor reports whether name is a read tool of the catalog in force that the
// tenant tenantID may call: the installation's, or that tenant's own.
func (l *Live) IsReadFor(tenantID int64, name string) bool {
	t, ok := l.Current().cat.Tools[name]
	return ok && t.Class == ClassRead && (t.TenantID == 0 || t.TenantID == tenantID)
}

// Loosening is an upstream tool a relist or reload would have made less strict than
// the definition in force: a lower class (unsafe → write, write → read) or its
// approval rule dropped. Tighten keeps the definition in force instead.
type Loosening struct {
	// Tool is the oncebox name ("<upstream>.<tool>"); Upstream and UpstreamTool the
	// upstream's names.
	Tool, Upstream, UpstreamTool string
	// From is the class in force, To the class the upstream or file now says.
	From, To string
	// ApprovalDropped says the tool had an approval rule and would have none.
	ApprovalDropped bool
}

// String is a sentence naming the tool and what the change would have loosened.
func (l Loosening) String() string {
	if l.ApprovalDropped && l.From == l.To {
		return fmt.Sprintf("upstream tool %s would lose its approval rule: refused, it keeps its definition in force (restart oncebox to loosen a tool)", l.Tool)
	}
	return fmt.Sprintf("upstream tool %s would go from %s to %s: refused, it keeps its definition in force (restart oncebox to loosen a tool)", l.Tool, l.From, l.To)
}

// loosens reports how next would loosen the upstream tool old, if it would.
func loosens(old, next *Tool) (Loosening, bool) {
	l := Loosening{Tool: old.Name, Upstream: old.Upstream, UpstreamTool: old.UpstreamTool, From: old.Class, To: next.Class,
		ApprovalDropped: old.Approval != nil && next.Approval == nil}
	return l, classRank(next.Class) < classRank(old.Class) || l.ApprovalDropped
}

// Tighten keeps, in next, the definition in force of every upstream tool next would
// loosen (classes only tighten while oncebox runs: an upstream cannot turn a gated
// tool into a read one by listing it again, nor can a reload), and returns those
// tools. Call it before making next's tools the registry's and before Swap, which
// refuses a runtime that loosens a tool.
func (l *Live) Tighten(next *Runtime) []Loosening {
	cur := l.Current()
	var out []Loosening
	for _, name := range next.cat.Names() {
		nt, old := next.cat.Tools[name], cur.cat.Tools[name]
		if old == nil || old.Upstream == "" || nt.Upstream != old.Upstream {
			continue
		}
		if lo, ok := loosens(old, nt); ok {
			next.cat.Tools[name] = old
			out = append(out, lo)
		}
	}
	return out
}

// Swap makes next the catalog in force, unless it needs what only a restart gives:
// a write or unsafe tool on a target that had none when the process started (it has
// no queue), an upstream tool made looser (see Tighten), a target whose native_keys changed (the outbox's key windows depend on
// it), or a changed approval rule (the process's default approval policy is set at
// start). The refusal is an *Error naming the file, the tool or target and the field;
// the catalog in force then stays.
func (l *Live) Swap(next *Runtime) error {
	cur := l.Current()
	for _, name := range next.cat.Names() {
		t := next.cat.Tools[name]
		if t.Class != ClassRead && len(t.Steps) == 0 && !l.queued[t.Target] {
			return &Error{File: next.cat.fileOf(t.Tenant), Kind: "tool", Name: name, Field: "target",
				Message: fmt.Sprintf("target %q had no write or unsafe tool when oncebox started, so it has no dispatch queue: restart oncebox to add it", t.Target)}
		}
	}
	for _, name := range sortedKeys(next.cat.Targets) {
		old, ok := cur.cat.Targets[name]
		if ok && old.NativeKeys != next.cat.Targets[name].NativeKeys {
			return &Error{File: next.cat.fileOf(next.cat.Targets[name].Tenant), Kind: "target", Name: name, Field: "native_keys",
				Message: "changes only on a restart: the outbox's key windows and lookup checks depend on it"}
		}
	}
	for _, name := range next.cat.UpstreamNames() {
		old, ok := cur.cat.Upstreams[name]
		file := next.cat.fileOf(next.cat.Upstreams[name].Tenant)
		if nu := next.cat.Upstreams[name]; ok && (old.NativeKeys != nu.NativeKeys || old.NativeWindow != nu.NativeWindow) {
			return &Error{File: file, Kind: "upstream", Name: name, Field: "native_keys",
				Message: "changes only on a restart: the outbox's key windows and lookup checks depend on it"}
		}
		if nu := next.cat.Upstreams[name]; ok && (old.Workers != nu.Workers || old.JobTimeout != nu.JobTimeout) {
			return &Error{File: file, Kind: "upstream", Name: name, Field: "workers",
				Message: "workers and job_timeout change only on a restart: they configure the upstream's dispatch queue"}
		}
	}
	for _, name := range next.cat.Names() {
		nt, old := next.cat.Tools[name], cur.cat.Tools[name]
		if old == nil || old.Upstream == "" || nt.Upstream != old.Upstream {
			continue
		}
		if lo, ok := loosens(old, nt); ok {
			return &Error{File: next.cat.fileOf(nt.Tenant), Kind: "tool", Name: name, Field: "class", Message: lo.String()}
		}
	}
	oldRules, newRules := cur.Approvals(), next.Approvals()
	for _, name := range next.cat.Names() {
		a, had := oldRules[name]
		b, has := newRules[name]
		if had != has || !reflect.DeepEqual(a, b) {
			return &Error{File: next.cat.fileOf(next.cat.Tools[name].Tenant), Kind: "tool", Name: name, Field: "approval",
				Message: "approval rules change only on a restart (the process's default approval policy is set at start)"}
		}
	}
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed {
		return &Error{File: next.cat.File, Message: "oncebox is shutting down"}
	}
	l.cur.Store(next)
	// An upstream next kept goes on as it was; one that changed is closed and its
	// process ended; one the file no longer names is parked. Calls in progress on a
	// closed session end as lost answers, and their ops are reconciled.
	retire(cur, next)
	return nil
}

// Close closes the upstream sessions of the runtime in force, parked ones included.
func (l *Live) Close() {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	l.closed = true
	l.Current().closeAll()
}

// Health reports the upstreams of the catalog in force (see Runtime.Health).
func (l *Live) Health() map[string]mcpupstream.Health { return l.Current().Health() }
