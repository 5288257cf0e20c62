package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/vendorhttp"
	"github.com/oncebox/oncebox/vendors/mcpupstream"
)

// Upstream is an MCP server oncebox stands in front of: its tools are offered as
// "<upstream>_<tool>", its read tools forwarded at once, its write and unsafe tools
// turned into ops.
type Upstream struct {
	// Name is the upstream's key in the file; it prefixes its tools' names.
	Name string
	// URL is the streamable HTTP endpoint, or "" for a stdio upstream.
	URL string
	// Headers are sent with every HTTP request, their values expanded from the
	// environment at load time. Never logged.
	Headers map[string]string `json:"-"`
	// Command is the stdio upstream's program, or "" for an HTTP upstream.
	Command string
	// Args are the program's arguments.
	Args []string
	// Env is the program's whole environment (besides PATH and HOME), its values
	// expanded from oncebox's environment at load time. Never logged.
	Env map[string]string `json:"-"`
	// NativeKeys says the upstream deduplicates tools/call on _meta
	// "oncebox/idempotency_key" for NativeWindow.
	NativeKeys bool
	// NativeWindow is how long a native-keys upstream remembers a key (24h by default).
	NativeWindow time.Duration
	// Tools are the file's settings for some of the upstream's tools, by the
	// upstream's tool name.
	Tools map[string]*UpstreamToolConfig
	// Workers is how many of the upstream's ops one process dispatches at once, in
	// the upstream's own River queue. 0: the webhook queue's (--webhook-workers).
	Workers int
	// JobTimeout bounds one dispatch of the upstream's ops. 0: the webhook queue's
	// (--webhook-job-timeout).
	JobTimeout time.Duration
	// Rate is how many tools/call requests per second one process sends the upstream,
	// every kind of call together (dispatches, read tools, lookups). 0: no limit.
	Rate float64
	// Burst is how many calls may go at once above Rate. Defaults to DefaultBurst(Rate).
	Burst int
	// vars are the values of the ${VAR}s expanded in Headers and Env: secrets cut out
	// of the upstream's errors, results and logs wherever they appear. Never logged.
	vars []string
	// MaxResultBytes bounds one answer of the upstream (mcpupstream.DefaultMaxResultBytes unless
	// the file sets max_result_bytes): a larger one fails its call, and only it.
	MaxResultBytes int64
	// Tenant names the tenant whose own catalog declares the upstream, "" for the
	// installation's; TenantID is its id (see Merge). Its tools are that tenant's.
	Tenant   string
	TenantID int64
	// egress is the policy on the addresses a tenant's HTTP upstream connects to
	// (LoadTenant), nil for the installation's.
	egress *vendorhttp.Egress
}

// DefaultBurst is an upstream's burst when the file sets a rate and no burst: one
// second's worth of calls, at least one.
func DefaultBurst(rate float64) int { return max(1, int(math.Ceil(rate))) }

// UpstreamToolConfig is what the file says about one upstream tool; the upstream's
// annotations may only make it stricter (see Classify).
type UpstreamToolConfig struct {
	// Class is ClassRead, ClassWrite, ClassUnsafe, or "" to classify by annotations.
	Class string
	// TagArgument names the argument that receives the op id.
	TagArgument string
	// LookupTool names the upstream read tool that finds the objects an op made.
	LookupTool string
	// LookupArgument names the lookup tool's argument taking the op id.
	LookupArgument string
	// TTL, DedupeWindow, Identity and Approval are as for a catalog tool; Identity is
	// checked against the input schema the upstream lists.
	TTL          time.Duration
	DedupeWindow *time.Duration
	Identity     []string
	Approval     *governance.ApprovalRule
	// Redact names the fields of the arguments and of the result hidden once an op
	// is settled; nil: none.
	Redact *Redaction
}

type upstreamFormat struct {
	URL          string                        `yaml:"url"`
	Headers      map[string]string             `yaml:"headers"`
	Command      string                        `yaml:"command"`
	Args         []string                      `yaml:"args"`
	Env          map[string]string             `yaml:"env"`
	NativeKeys   bool                          `yaml:"native_keys"`
	NativeWindow string                        `yaml:"native_window"`
	Tools        map[string]upstreamToolFormat `yaml:"tools"`
	Workers      int                           `yaml:"workers"`
	JobTimeout   string                        `yaml:"job_timeout"`
	Rate         *rateFormat                   `yaml:"rate"`
	MaxResult    *int64                        `yaml:"max_result_bytes"`
}

type rateFormat struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
}

type upstreamToolFormat struct {
	Class          string          `yaml:"class"`
	TagArgument    string          `yaml:"tag_argument"`
	LookupTool     string          `yaml:"lookup_tool"`
	LookupArgument string          `yaml:"lookup_argument"`
	TTL            string          `yaml:"ttl"`
	DedupeWindow   string          `yaml:"dedupe_window"`
	Identity       []string        `yaml:"identity"`
	Approval       *approvalFormat `yaml:"approval"`
	Redact         *redactFormat   `yaml:"redact"`
}

// expand replaces ${VAR} and $VAR in s from env, and returns the names of the
// variables that are not set, the values of those that are, and why the first the
// file may not read is refused ("" when none is).
func expand(s string, env envFunc) (out string, missing, values []string, refused string) {
	out = os.Expand(s, func(k string) string {
		v, why := env(k)
		switch {
		case why != "":
			if refused == "" {
				refused = why
			}
		case v == "":
			missing = append(missing, k)
		default:
			values = append(values, v)
		}
		return v
	})
	return out, missing, values, refused
}

func checkUpstream(file, name string, f upstreamFormat, env envFunc) (*Upstream, error) {
	bad := func(field, msg string) error {
		return &Error{File: file, Kind: "upstream", Name: name, Field: field, Message: msg}
	}
	if !targetName.MatchString(name) {
		return nil, bad("", "an upstream name is 1 to 40 lower-case letters, digits and underscores, starting with a letter")
	}
	u := &Upstream{Name: name, URL: f.URL, Command: f.Command, Args: f.Args, NativeKeys: f.NativeKeys,
		NativeWindow: 24 * time.Hour, Headers: map[string]string{}, Env: map[string]string{}, Tools: map[string]*UpstreamToolConfig{}}
	if err := checkUpstreamTransport(u, f, env, bad); err != nil {
		return nil, err
	}
	if err := checkUpstreamLimits(u, f, bad); err != nil {
		return nil, err
	}
	for _, tn := range sortedKeys(f.Tools) {
		tc, err := checkUpstreamTool("tools."+tn, f.Tools[tn], bad)
		if err != nil {
			return nil, err
		}
		u.Tools[tn] = tc
	}
	return u, nil
}

// checkUpstreamTransport checks an upstream's url or command and expands its headers
// or environment into u.
func checkUpstreamTransport(u *Upstream, f upstreamFormat, env envFunc, bad badFunc) error {
	switch {
	case (f.URL == "") == (f.Command == ""):
		return bad("url", "set either url (streamable HTTP) or command (stdio), not both")
	case f.URL != "":
		pu, err := url.Parse(f.URL)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return bad("url", "must be an absolute http or https URL")
		}
		if pu.User != nil {
			return bad("url", "must not carry credentials: use headers with ${VARIABLE} values")
		}
		if len(f.Args) > 0 || len(f.Env) > 0 {
			return bad("args", "args and env are for a stdio upstream (command)")
		}
	default:
		if len(f.Headers) > 0 {
			return bad("headers", "headers are for an HTTP upstream (url)")
		}
	}
	for _, k := range sortedKeys(f.Headers) {
		v, missing, values, refused := expand(f.Headers[k], env)
		if refused != "" {
			return bad("headers", fmt.Sprintf("header %s: %s", k, refused))
		}
		if len(missing) > 0 {
			return bad("headers", fmt.Sprintf("header %s: the environment variable %s is not set", k, missing[0]))
		}
		u.Headers[http.CanonicalHeaderKey(k)] = v
		u.vars = append(u.vars, values...)
	}
	for _, k := range sortedKeys(f.Env) {
		v, missing, values, refused := expand(f.Env[k], env)
		if refused != "" {
			return bad("env", fmt.Sprintf("%s: %s", k, refused))
		}
		if len(missing) > 0 {
			return bad("env", fmt.Sprintf("%s: the environment variable %s is not set", k, missing[0]))
		}
		u.Env[k] = v
		u.vars = append(u.vars, values...)
	}
	return nil
}

// checkUpstreamLimits reads an upstream's native window, workers, result bound, job
// timeout and rate into u.
func checkUpstreamLimits(u *Upstream, f upstreamFormat, bad badFunc) error {
	if f.NativeWindow != "" {
		d, err := time.ParseDuration(f.NativeWindow)
		if err != nil || d <= 0 {
			return bad("native_window", fmt.Sprintf("%q is not a positive duration such as 24h", f.NativeWindow))
		}
		u.NativeWindow = d
	}
	if f.Workers < 0 {
		return bad("workers", fmt.Sprintf("%d is negative: leave it out for the webhook queue's --webhook-workers", f.Workers))
	}
	u.Workers = f.Workers
	u.MaxResultBytes = mcpupstream.DefaultMaxResultBytes
	if f.MaxResult != nil {
		if *f.MaxResult < 1024 {
			return bad("max_result_bytes", fmt.Sprintf("%d is less than 1024 bytes: leave it out for %d (1 MiB)", *f.MaxResult, mcpupstream.DefaultMaxResultBytes))
		}
		u.MaxResultBytes = *f.MaxResult
	}
	if f.JobTimeout != "" {
		d, err := time.ParseDuration(f.JobTimeout)
		if err != nil || d <= 0 {
			return bad("job_timeout", fmt.Sprintf("%q is not a positive duration such as 30s", f.JobTimeout))
		}
		u.JobTimeout = d
	}
	if f.Rate != nil {
		if f.Rate.PerSecond <= 0 || math.IsInf(f.Rate.PerSecond, 0) || math.IsNaN(f.Rate.PerSecond) {
			return bad("rate.per_second", "must be a positive number of tools/call requests per second (leave rate out for no limit)")
		}
		if f.Rate.Burst < 0 {
			return bad("rate.burst", fmt.Sprintf("%d is negative", f.Rate.Burst))
		}
		u.Rate, u.Burst = f.Rate.PerSecond, f.Rate.Burst
		if u.Burst == 0 {
			u.Burst = DefaultBurst(u.Rate)
		}
	}
	return nil
}

// checkUpstreamTool checks the file's settings for one upstream tool, whose fields
// are named field+".class" and so on.
func checkUpstreamTool(field string, tf upstreamToolFormat, bad badFunc) (*UpstreamToolConfig, error) {
	tc := &UpstreamToolConfig{Class: tf.Class, TagArgument: tf.TagArgument, LookupTool: tf.LookupTool, LookupArgument: tf.LookupArgument,
		Identity: tf.Identity}
	switch tc.Class {
	case "", ClassRead, ClassWrite, ClassUnsafe:
	default:
		return nil, bad(field+".class", fmt.Sprintf("%q is not read, write or unsafe", tc.Class))
	}
	if (tc.LookupTool == "") != (tc.LookupArgument == "") {
		return nil, bad(field+".lookup_tool", "set both lookup_tool and lookup_argument (the argument that takes the op id), or neither")
	}
	ops, err := checkOpFields(field+".", tf.TTL, tf.DedupeWindow, tf.Approval, bad)
	if err != nil {
		return nil, err
	}
	tc.TTL, tc.DedupeWindow, tc.Approval = ops.ttl, ops.dedupeWindow, ops.approval
	if tf.Redact != nil {
		for _, c := range []struct {
			name  string
			paths []string
		}{{"args", tf.Redact.Args}, {"result", tf.Redact.Result}} {
			if msg := checkPaths(c.paths); msg != "" {
				return nil, bad(field+".redact."+c.name, msg)
			}
		}
		if len(tf.Redact.Args)+len(tf.Redact.Result) == 0 {
			return nil, bad(field+".redact", "names no field: list args and/or result paths, or leave redact out")
		}
		tc.Redact = &Redaction{Args: tf.Redact.Args, Result: tf.Redact.Result}
	}
	if tc.Class == ClassRead && (tf.TTL != "" || tf.DedupeWindow != "" || tf.Approval != nil || tc.TagArgument != "" || tc.LookupTool != "" || tf.Redact != nil || tf.Identity != nil) {
		return nil, bad(field+".class", "a read tool makes no op: ttl, dedupe_window, identity, approval, tag_argument, lookup_tool and redact do not apply")
	}
	return tc, nil
}

// Classify returns the class of an upstream tool. The file comes first: its class,
// else at least write when it sets anything only an op has (approval, ttl,
// dedupe_window, identity, tag_argument, lookup_tool, redact). The upstream's annotations
// (readOnlyHint → read, destructiveHint → unsafe, otherwise write; missing
// annotations make a write tool, never a read one) classify a tool the file says
// nothing of, and may only make a tool stricter than the file says, never looser: a
// destructiveHint makes any tool unsafe.
func Classify(cfg *UpstreamToolConfig, ann *mcp.ToolAnnotations) string {
	byAnn := annotatedClass(ann)
	switch {
	case cfg == nil:
		return byAnn
	case cfg.Class != "":
		if byAnn == ClassUnsafe {
			return ClassUnsafe
		}
		return cfg.Class
	case cfg.makesOps():
		return Stricter(byAnn, ClassWrite)
	}
	return byAnn
}

// annotatedClass is the class the upstream's annotations say.
func annotatedClass(ann *mcp.ToolAnnotations) string {
	switch {
	case ann == nil:
		return ClassWrite
	case ann.DestructiveHint != nil && *ann.DestructiveHint && !ann.ReadOnlyHint:
		return ClassUnsafe
	case ann.ReadOnlyHint:
		return ClassRead
	}
	return ClassWrite
}

// makesOps reports whether the file sets something only a write or unsafe tool has.
func (c *UpstreamToolConfig) makesOps() bool {
	return c.Approval != nil || c.TTL != 0 || c.DedupeWindow != nil || c.TagArgument != "" || c.LookupTool != "" || c.Redact != nil ||
		c.Identity != nil
}

// classRank orders the classes from the loosest (read) to the strictest (unsafe).
func classRank(class string) int {
	switch class {
	case ClassRead:
		return 0
	case ClassWrite:
		return 1
	}
	return 2
}

// Stricter returns the stricter of two classes (read < write < unsafe).
func Stricter(a, b string) string {
	if classRank(b) > classRank(a) {
		return b
	}
	return a
}

// mcpSafe turns an upstream tool name into the part of an oncebox name after
// "<upstream>.": every character outside [a-zA-Z0-9_-] becomes "_".
func mcpSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// addUpstreamTools adds an upstream's listed tools to the catalog, named
// "<upstream>.<tool>" (MCP: "<upstream>_<tool>"), and checks the file's settings
// against the list.
func (c *Catalog) addUpstreamTools(u *Upstream, listed []*mcp.Tool) error {
	bad := func(field, msg string) error {
		return &Error{File: c.fileOf(u.Tenant), Kind: "upstream", Name: u.Name, Field: field, Message: msg}
	}
	byName := map[string]*mcp.Tool{}
	for _, lt := range listed {
		byName[lt.Name] = lt
	}
	if err := checkUpstreamToolsListed(u, byName, bad); err != nil {
		return err
	}
	for _, lt := range listed {
		name := u.Name + "." + mcpSafe(lt.Name)
		if mcpLen := len(u.Name) + 1 + len(mcpSafe(lt.Name)); mcpLen > 64 || lt.Name == "" {
			return bad("", fmt.Sprintf("upstream tool %q: its name %q would be longer than 64 characters, too long for strict clients", lt.Name, strings.ReplaceAll(name, ".", "_")))
		}
		if _, dup := c.Tools[name]; dup {
			return bad("", fmt.Sprintf("upstream tool %q: the name %q is taken", lt.Name, name))
		}
		t, err := upstreamTool(name, u, lt, bad)
		if err != nil {
			return err
		}
		c.Tools[name] = t
	}
	return nil
}

// checkUpstreamToolsListed checks that every tool the file sets something for, and
// every lookup tool it names, is one the upstream lists (byName), a lookup tool a
// read one.
func checkUpstreamToolsListed(u *Upstream, byName map[string]*mcp.Tool, bad badFunc) error {
	for _, tn := range sortedKeys(u.Tools) {
		tc := u.Tools[tn]
		if byName[tn] == nil {
			return bad("tools."+tn, "the upstream lists no such tool")
		}
		if tc.LookupTool != "" {
			lt := byName[tc.LookupTool]
			if lt == nil {
				return bad("tools."+tn+".lookup_tool", fmt.Sprintf("the upstream lists no tool %q", tc.LookupTool))
			}
			if Classify(u.Tools[tc.LookupTool], lt.Annotations) != ClassRead {
				return bad("tools."+tn+".lookup_tool", fmt.Sprintf("%q is not a read tool (mark it readOnlyHint upstream or class: read here)", tc.LookupTool))
			}
		}
	}
	return nil
}

// upstreamTool is the catalog tool name of the upstream tool lt, as the file's
// settings for it (if any) and its listing define it.
func upstreamTool(name string, u *Upstream, lt *mcp.Tool, bad badFunc) (*Tool, error) {
	tc := u.Tools[lt.Name]
	if tc == nil {
		tc = &UpstreamToolConfig{}
	}
	t := &Tool{Name: name, Description: strings.TrimSpace(lt.Description), Class: Classify(tc, lt.Annotations), Target: u.Name,
		Upstream: u.Name, UpstreamTool: lt.Name, TagArgument: tc.TagArgument, LookupTool: tc.LookupTool, LookupArgument: tc.LookupArgument,
		TTL: tc.TTL, DedupeWindow: tc.DedupeWindow, Identity: tc.Identity, Approval: tc.Approval, Redact: tc.Redact,
		Tenant: u.Tenant, TenantID: u.TenantID}
	if t.Description == "" {
		t.Description = fmt.Sprintf("Tool %s of the MCP server %s.", lt.Name, u.Name)
	}
	schema := []byte(`{"type":"object"}`)
	if lt.InputSchema != nil {
		b, err := json.Marshal(lt.InputSchema)
		if err != nil {
			return nil, bad("", fmt.Sprintf("upstream tool %q: its input schema cannot be written as JSON: %v", lt.Name, err))
		}
		schema = b
	}
	upstreamSchema := schema
	if t.TagArgument != "" && t.Class != ClassRead {
		// The tag argument is oncebox's: the model never sees it, and a caller who
		// sends it is refused (Validate).
		var err error
		if schema, err = withoutProperty(schema, t.TagArgument); err != nil {
			return nil, bad("tools."+lt.Name+".tag_argument", err.Error())
		}
	}
	t.InputSchema = schema
	if t.Redact != nil && t.Class != ClassRead {
		var root struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(schema, &root)
		for _, p := range t.Redact.Args {
			if first, _, _ := strings.Cut(p, "."); root.Properties != nil && root.Properties[first] == nil {
				return nil, bad("tools."+lt.Name+".redact.args", fmt.Sprintf("%q: the tool's input schema has no property %q", p, first))
			}
		}
	}
	if t.Class != ClassRead {
		if msg := checkIdentity(t.Identity, schema); msg != "" {
			return nil, bad("tools."+lt.Name+".identity", msg)
		}
	}
	sch, err := compileSchema(name, schema)
	if err != nil {
		return nil, bad("", fmt.Sprintf("upstream tool %q: its input schema does not compile: %v", lt.Name, err))
	}
	t.schema = sch
	t.Version = upstreamVersion(t, u, upstreamSchema)
	return t, nil
}

// upstreamVersion hashes what decides how an op of an upstream tool is validated and
// sent: schema is the upstream's own (with the tag argument, which the tool's
// InputSchema leaves out).
func upstreamVersion(t *Tool, u *Upstream, schema json.RawMessage) string {
	b, _ := json.Marshal(struct {
		Class, Upstream, UpstreamTool, URL, Command, Tag string
		Args                                             []string
		Schema                                           json.RawMessage
	}{t.Class, u.Name, t.UpstreamTool, u.URL, u.Command, t.TagArgument, u.Args, schema})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// withoutProperty returns schema without the root property name, which it must have,
// in its properties and its required list.
func withoutProperty(schema []byte, name string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("the tool's input schema is not a JSON object: %w", err)
	}
	props, _ := root["properties"].(map[string]any)
	if _, ok := props[name]; !ok {
		return nil, fmt.Errorf("%q is not a property of the tool's input schema (its properties: %s): name the argument that receives the op id",
			name, propertyList(props))
	}
	delete(props, name)
	if req, ok := root["required"].([]any); ok {
		kept := []any{}
		for _, r := range req {
			if r != name {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(root, "required")
		} else {
			root["required"] = kept
		}
	}
	return json.Marshal(root)
}

// propertyList names a schema's properties for an error, sorted.
func propertyList(props map[string]any) string {
	if len(props) == 0 {
		return "none"
	}
	return strings.Join(sortedKeys(props), ", ")
}

// upstreamArgs decodes an op's arguments as the object sent upstream, with the op id
// in the tool's tag argument.
func upstreamArgs(t *Tool, args json.RawMessage, opID string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	m := map[string]any{}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("decode %s arguments: %w", t.Name, err)
		}
	}
	if t.TagArgument != "" && opID != "" {
		m[t.TagArgument] = opID
	}
	return m, nil
}

// UpstreamNames returns the upstreams' names, sorted.
func (c *Catalog) UpstreamNames() []string { return sortedKeys(c.Upstreams) }
