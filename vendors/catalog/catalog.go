package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/vendorhttp"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Classes of a tool.
const (
	// ClassRead is called at once, with no op and no key, and its answer returned.
	ClassRead = "read"
	// ClassWrite goes through the outbox like webhook.post.
	ClassWrite = "write"
	// ClassUnsafe goes through the outbox and waits for a person's approval.
	ClassUnsafe = "unsafe"
)

// VendorPrefix starts the name of the vendorapi.Vendor of each catalog target.
const VendorPrefix = "catalog_"

var (
	// targetName is what a target may be called: it becomes part of a vendor and a
	// River queue name.
	targetName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	// toolName is what a catalog tool may be called: a dotted name whose MCP form
	// (dots as underscores) is valid for the strictest clients, ^[a-zA-Z0-9_-]{1,64}$.
	toolName = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*$`)
	// template is a {name} in a path.
	template = regexp.MustCompile(`\{([^{}]*)\}`)
)

// Target is one HTTP receiver of catalog tools.
type Target struct {
	// Name is the target's key in the file.
	Name string
	// BaseURL is the absolute http or https URL the tools' paths are appended to.
	BaseURL string
	// SecretHeader carries the secret read from SecretEnv; both or neither.
	SecretHeader string
	// SecretEnv names the environment variable holding the secret.
	SecretEnv string
	// Secret is SecretEnv's value at load time. Never logged.
	Secret string `json:"-"`
	// NativeKeys says the target honours Idempotency-Key (for 24 hours).
	NativeKeys bool
	// LookupPath answers GET ?oncebox_op=<op id> with {"objects":[...]}; optional.
	LookupPath string
	// Tenant names the tenant whose own catalog declares the target, "" for the
	// installation's (see Merge): only that tenant's tools call it.
	Tenant string
	// egress is the policy on the addresses a tenant's target connects to
	// (LoadTenant), nil for the installation's.
	egress *vendorhttp.Egress
}

// Tool is one catalog tool.
type Tool struct {
	// Name is the tool's name, such as "helpdesk.create_ticket".
	Name string
	// Description tells an agent what the tool does.
	Description string
	// Class is ClassRead, ClassWrite or ClassUnsafe.
	Class string
	// Target names the Target the tool calls.
	Target string
	// Method is the HTTP method (POST by default, GET for read tools).
	Method string
	// Path is the path on the target, with {arg} templates.
	Path string
	// InputSchema is the JSON Schema (2020-12) of the arguments, as JSON.
	InputSchema json.RawMessage
	// TTL is how long the tool's ops are kept; 0 means the server's default.
	TTL time.Duration
	// DedupeWindow is how long identical MCP calls naming no conversation are one
	// op; nil means the default of every write and unsafe tool (24 hours, or the
	// tool's TTL when shorter); 0 turns it off.
	DedupeWindow *time.Duration
	// Identity names the arguments that identify an op of the tool
	// (vendorapi.Tool.Identity), such as [customer, order_ref]: within the dedupe window,
	// an MCP call that agrees with an earlier one on them is that op even when its other
	// arguments are worded differently. nil: every argument identifies the op.
	Identity []string
	// Owned names the path templates whose argument is an existing object of the target
	// that must be the tenant's (vendorapi.Tool.Objects), such as [ticket_id] in
	// /tickets/{ticket_id}/close: made by one of the tenant's ops of the target (its
	// vendor reference) or adopted by the tenant. nil: none.
	Owned []string
	// Approval is the tool's approval rule (the approvals' policy type), nil when
	// the file sets none: an unsafe tool then always waits, a write tool never does.
	// --approval-policy and a tenant's own rule for the tool take precedence.
	Approval *governance.ApprovalRule
	// Upstream names the upstream MCP server the tool comes from, "" for an HTTP
	// target's tool (then Target is the upstream's name too).
	Upstream string
	// UpstreamTool is the tool's name on its upstream.
	UpstreamTool string
	// TagArgument names the upstream tool's argument that receives the op id, if any.
	TagArgument string
	// LookupTool names the upstream read tool that finds an op's objects, if any.
	LookupTool string
	// LookupArgument names the lookup tool's argument that takes the op id.
	LookupArgument string
	// Redact names the fields an upstream tool's ops hide once settled, nil for none.
	Redact *Redaction
	// Tenant names the tenant whose own catalog declares the tool, "" for the
	// installation's; TenantID is its id (see Merge). Only that tenant sees and calls
	// a tenant's tool.
	Tenant   string
	TenantID int64
	// Steps, for a composite tool (steps: in the file; docs/steps.md), are the tools
	// it calls, in order; its Class is ClassWrite and it has no target.
	Steps []vendorapi.Step
	// Version identifies this definition: a hash of everything that decides how an
	// op of the tool is validated and sent (class, schema, target, method, path). An
	// op keeps the version it was accepted under (see Definition).
	Version string

	schema *jsonschema.Schema
	params []string // path template names, in order
}

// Catalog is a loaded, checked tool file.
type Catalog struct {
	// File is the path the catalog was read from.
	File string
	// Targets are the targets, by name.
	Targets map[string]*Target
	// Tools are the tools, by name; an upstream's tools are added by Connect.
	Tools map[string]*Tool
	// Upstreams are the upstream MCP servers, by name.
	Upstreams map[string]*Upstream
	// tenantFiles are the files of the tenants' own catalogs merged in, by tenant
	// name (see Merge).
	tenantFiles map[string]string
	// reserved are the names of the tools offered besides the catalog (Merge's), in
	// every tenant's view (checkViews).
	reserved []string
}

// fileFormat is the YAML document.
type fileFormat struct {
	Targets   map[string]targetFormat   `yaml:"targets"`
	Tools     map[string]toolFormat     `yaml:"tools"`
	Upstreams map[string]upstreamFormat `yaml:"upstreams"`
}

type targetFormat struct {
	BaseURL      string `yaml:"base_url"`
	SecretHeader string `yaml:"secret_header"`
	SecretEnv    string `yaml:"secret_env"`
	NativeKeys   bool   `yaml:"native_keys"`
	LookupPath   string `yaml:"lookup_path"`
}

type toolFormat struct {
	Description  string          `yaml:"description"`
	Class        string          `yaml:"class"`
	Target       string          `yaml:"target"`
	Method       string          `yaml:"method"`
	Path         string          `yaml:"path"`
	InputSchema  map[string]any  `yaml:"input_schema"`
	TTL          string          `yaml:"ttl"`
	DedupeWindow string          `yaml:"dedupe_window"`
	Identity     []string        `yaml:"identity"`
	Owned        []string        `yaml:"owned"`
	Approval     *approvalFormat `yaml:"approval"`
	Steps        []stepFormat    `yaml:"steps"`
}

type approvalFormat struct {
	Mode      string           `yaml:"mode"`
	Above     map[string]int64 `yaml:"above"`
	Approvers int              `yaml:"approvers"`
}

// Error is a catalog that cannot be loaded: it names the file and, when the error is
// about one, the tool or target and the field.
type Error struct {
	// File is the catalog's path.
	File string
	// Kind is "tool" or "target", or "" for the file as a whole.
	Kind string
	// Name is the tool's or target's name.
	Name string
	// Field is the offending field, such as "input_schema" or "path".
	Field string
	// Message says what is wrong.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Kind != "" {
		fmt.Fprintf(&b, ": %s %q", e.Kind, e.Name)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Load reads and checks the catalog at path; getenv reads the targets' secrets
// (os.Getenv when nil).
func Load(path string, getenv func(string) string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Message: fmt.Sprintf("cannot read the tool catalog: %v", err)}
	}
	return Parse(path, data, getenv)
}

// Parse checks a catalog held in memory; file names it in errors.
func Parse(file string, data []byte, getenv func(string) string) (*Catalog, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	return parse(file, data, openEnv(getenv))
}

// parse checks a catalog held in memory, reading its variables with env.
func parse(file string, data []byte, env envFunc) (*Catalog, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{File: file, Message: "not a valid tool catalog: " + err.Error()}
	}
	if err := checkFields(file, &doc); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f fileFormat
	if err := dec.Decode(&f); err != nil {
		return nil, &Error{File: file, Message: "not a valid tool catalog: " + err.Error()}
	}
	c := &Catalog{File: file, Targets: map[string]*Target{}, Tools: map[string]*Tool{}, Upstreams: map[string]*Upstream{}}
	for _, name := range sortedKeys(f.Targets) {
		t, err := checkTarget(file, name, f.Targets[name], env)
		if err != nil {
			return nil, err
		}
		c.Targets[name] = t
	}
	for _, name := range sortedKeys(f.Upstreams) {
		u, err := checkUpstream(file, name, f.Upstreams[name], env)
		if err != nil {
			return nil, err
		}
		if _, dup := c.Targets[name]; dup {
			return nil, &Error{File: file, Kind: "upstream", Name: name, Message: "a target has the same name"}
		}
		c.Upstreams[name] = u
	}
	if len(f.Tools) == 0 && len(f.Upstreams) == 0 {
		return nil, &Error{File: file, Field: "tools", Message: "declares no tool and no upstream"}
	}
	for _, name := range sortedKeys(f.Tools) {
		t, err := c.checkTool(name, f.Tools[name])
		if err != nil {
			return nil, err
		}
		c.Tools[name] = t
	}
	if err := c.checkNoNesting(); err != nil {
		return nil, err
	}
	return c, nil
}

func checkTarget(file, name string, f targetFormat, env envFunc) (*Target, error) {
	bad := func(field, msg string) error {
		return &Error{File: file, Kind: "target", Name: name, Field: field, Message: msg}
	}
	if !targetName.MatchString(name) {
		return nil, bad("", "a target name is 1 to 40 lower-case letters, digits and underscores, starting with a letter")
	}
	u, err := url.Parse(f.BaseURL)
	switch {
	case f.BaseURL == "":
		return nil, bad("base_url", "is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, bad("base_url", "must be an absolute http or https URL")
	case u.User != nil:
		return nil, bad("base_url", "must not carry credentials: use secret_header and secret_env")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, bad("base_url", "must not have a query or a fragment")
	}
	t := &Target{Name: name, BaseURL: f.BaseURL, SecretHeader: f.SecretHeader, SecretEnv: f.SecretEnv,
		NativeKeys: f.NativeKeys, LookupPath: f.LookupPath}
	if (f.SecretHeader == "") != (f.SecretEnv == "") {
		return nil, bad("secret_env", "set both secret_header and secret_env, or neither (the secret comes from the environment, never the file)")
	}
	if f.SecretEnv != "" {
		var refused string
		if t.Secret, refused = env(f.SecretEnv); refused != "" {
			return nil, bad("secret_env", refused)
		}
		if t.Secret == "" {
			return nil, bad("secret_env", fmt.Sprintf("the environment variable %s is not set", f.SecretEnv))
		}
	}
	if f.LookupPath != "" && !strings.HasPrefix(f.LookupPath, "/") {
		return nil, bad("lookup_path", `must start with "/"`)
	}
	return t, nil
}

// badFunc makes the error of a field of one entry of the file (a tool, a target, an
// upstream).
type badFunc func(field, msg string) error

func (c *Catalog) checkTool(name string, f toolFormat) (*Tool, error) {
	bad := func(field, msg string) error {
		return &Error{File: c.File, Kind: "tool", Name: name, Field: field, Message: msg}
	}
	if !toolName.MatchString(name) || len(name) > 64 {
		return nil, bad("", "a tool name is at most 64 lower-case letters, digits, '_' and '-', in dot-separated parts")
	}
	if strings.HasPrefix(name, "stripe.") || strings.HasPrefix(name, "sendgrid.") || strings.HasPrefix(name, "webhook.") {
		return nil, bad("", `the prefixes "stripe.", "sendgrid." and "webhook." belong to the built-in tools`)
	}
	if f.Steps != nil {
		return c.checkComposite(name, f, bad)
	}
	t := &Tool{Name: name, Description: strings.TrimSpace(f.Description), Class: f.Class, Target: f.Target,
		Method: strings.ToUpper(f.Method), Path: f.Path}
	if t.Description == "" {
		return nil, bad("description", "is required: it is what an agent reads to choose the tool")
	}
	switch t.Class {
	case ClassRead, ClassWrite, ClassUnsafe:
	case "":
		return nil, bad("class", "is required: read, write or unsafe")
	default:
		return nil, bad("class", fmt.Sprintf("%q is not read, write or unsafe", t.Class))
	}
	if t.Target == "" {
		return nil, bad("target", "is required")
	}
	if _, ok := c.Targets[t.Target]; !ok {
		return nil, bad("target", fmt.Sprintf("%q is not a target of this file", t.Target))
	}
	if t.Method == "" {
		t.Method = http.MethodPost
		if t.Class == ClassRead {
			t.Method = http.MethodGet
		}
	}
	switch t.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, bad("method", fmt.Sprintf("%q is not GET, POST, PUT, PATCH or DELETE", f.Method))
	}
	if err := checkToolSchema(t, f, bad); err != nil {
		return nil, err
	}
	ops, err := checkOpFields("", f.TTL, f.DedupeWindow, f.Approval, bad)
	if err != nil {
		return nil, err
	}
	t.TTL, t.DedupeWindow, t.Approval = ops.ttl, ops.dedupeWindow, ops.approval
	if msg := checkIdentity(f.Identity, t.InputSchema); msg != "" {
		return nil, bad("identity", msg)
	}
	t.Identity = f.Identity
	if msg := checkOwned(f.Owned, t.params); msg != "" {
		return nil, bad("owned", msg)
	}
	t.Owned = f.Owned
	if t.Class == ClassRead && (f.TTL != "" || f.DedupeWindow != "" || f.Approval != nil || f.Identity != nil || f.Owned != nil) {
		return nil, bad("class", "a read tool makes no op: ttl, dedupe_window, identity, owned and approval do not apply")
	}
	t.Version = version(t)
	return t, nil
}

// checkToolSchema checks a catalog tool's input schema and the path templates that
// name its properties, and sets t's schema and parameters.
func checkToolSchema(t *Tool, f toolFormat, bad badFunc) error {
	if f.InputSchema == nil {
		return bad("input_schema", "is required (a JSON Schema of type object)")
	}
	if f.InputSchema["type"] != "object" {
		return bad("input_schema", `must have "type: object" at its root (arguments are a JSON object)`)
	}
	if msg := undeclaredRequired(f.InputSchema, ""); msg != "" {
		return bad("input_schema", msg)
	}
	raw, err := json.Marshal(f.InputSchema)
	if err != nil {
		return bad("input_schema", "cannot be written as JSON: "+err.Error())
	}
	t.InputSchema = raw
	if t.schema, err = compileSchema(t.Name, raw); err != nil {
		return bad("input_schema", err.Error())
	}
	if f.Steps != nil {
		return nil // a tool with steps has no path
	}
	if msg := checkPath(f.Path); msg != "" {
		return bad("path", msg)
	}
	required, props := schemaParams(f.InputSchema)
	for _, m := range template.FindAllStringSubmatch(f.Path, -1) {
		p := m[1]
		if !slices.Contains(required, p) {
			return bad("path", fmt.Sprintf("template {%s} must name a required property of input_schema", p))
		}
		if typ := props[p]; typ != "string" && typ != "integer" {
			return bad("path", fmt.Sprintf("template {%s} must name a property of type string or integer", p))
		}
		t.params = append(t.params, p)
	}
	return nil
}

// opFields are the settings only an op has, as the file's tool or upstream tool
// sets them.
type opFields struct {
	ttl          time.Duration
	dedupeWindow *time.Duration
	approval     *governance.ApprovalRule
}

// checkOpFields reads a tool's ttl, dedupe_window and approval, whose fields are
// named prefix+"ttl" and so on.
func checkOpFields(prefix, ttl, dedupeWindow string, approval *approvalFormat, bad badFunc) (opFields, error) {
	var out opFields
	if ttl != "" {
		d, err := time.ParseDuration(ttl)
		if err != nil || d <= 0 {
			return out, bad(prefix+"ttl", fmt.Sprintf("%q is not a positive duration such as 72h", ttl))
		}
		out.ttl = d
	}
	if dedupeWindow != "" {
		d, err := time.ParseDuration(dedupeWindow)
		if err != nil || d < 0 {
			return out, bad(prefix+"dedupe_window", fmt.Sprintf("%q is not a duration such as 24h (0s turns it off)", dedupeWindow))
		}
		out.dedupeWindow = &d
	}
	if approval != nil {
		r := governance.ApprovalRule{Mode: governance.ApprovalMode(approval.Mode), Above: approval.Above, Approvers: approval.Approvers}
		if err := r.Validate(); err != nil {
			return out, bad(prefix+"approval", err.Error())
		}
		out.approval = &r
	}
	return out, nil
}

// compileSchema compiles a tool's input schema under draft 2020-12, refusing any
// reference outside the schema itself.
func compileSchema(name string, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if msg := externalRef(doc, ""); msg != "" {
		return nil, errors.New(msg)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network reference
	loc := "urn:oncebox:tool:" + name
	if err := comp.AddResource(loc, doc); err != nil {
		return nil, err
	}
	sch, err := comp.Compile(loc)
	if err != nil {
		var (
			se *jsonschema.SchemaValidationError
			ve *jsonschema.ValidationError
		)
		if errors.As(err, &se) && errors.As(se.Err, &ve) {
			// The deepest cause says which keyword of the schema is wrong.
			for len(ve.Causes) > 0 {
				ve = ve.Causes[0]
			}
			return nil, fmt.Errorf("not a valid JSON Schema 2020-12 at /%s: %s", strings.Join(ve.InstanceLocation, "/"),
				ve.ErrorKind.LocalizedString(printer))
		}
		return nil, errors.New(strings.ReplaceAll(err.Error(), loc, "input_schema"))
	}
	return sch, nil
}

// checkIdentity returns why identity fields cannot identify the ops of a tool whose
// input schema is schema, or "": each must be a distinct property at the schema's root.
func checkIdentity(fields []string, schema json.RawMessage) string {
	if fields == nil {
		return ""
	}
	if len(fields) == 0 {
		return "names no argument: list the arguments that identify an op, or leave identity out (every argument then does)"
	}
	var root struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &root)
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f] {
			return fmt.Sprintf("names %q twice", f)
		}
		seen[f] = true
		if root.Properties[f] == nil {
			return fmt.Sprintf("%q is not a property of the tool's input schema (identity names top-level arguments)", f)
		}
	}
	return ""
}

// checkOwned returns why owned cannot name the objects of a tool whose path templates
// are params, or "": each must be a distinct template of the path.
func checkOwned(owned, params []string) string {
	if owned == nil {
		return ""
	}
	if len(owned) == 0 {
		return "names no argument: list the path templates that name an object the tenant must own, or leave owned out"
	}
	seen := map[string]bool{}
	for _, o := range owned {
		if seen[o] {
			return fmt.Sprintf("names %q twice", o)
		}
		seen[o] = true
		if !slices.Contains(params, o) {
			return fmt.Sprintf("%q is not a {template} of the tool's path (owned names the path's objects)", o)
		}
	}
	return ""
}

// schemaParams returns the required properties of a schema's root and each
// property's "type" when it is a single string.
func schemaParams(s map[string]any) ([]string, map[string]string) {
	var required []string
	if r, ok := s["required"].([]any); ok {
		for _, v := range r {
			if n, ok := v.(string); ok {
				required = append(required, n)
			}
		}
	}
	props := map[string]string{}
	if p, ok := s["properties"].(map[string]any); ok {
		for name, v := range p {
			if m, ok := v.(map[string]any); ok {
				if typ, ok := m["type"].(string); ok {
					props[name] = typ
				}
			}
		}
	}
	return required, props
}

// checkPath returns why p is not an acceptable path template, or "".
func checkPath(p string) string {
	switch {
	case p == "":
		return "is required"
	case !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//"):
		return `must start with a single "/" (a path on the target, not a URL)`
	case strings.ContainsAny(p, "?#\\ ") || strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "must not contain a query, a fragment, spaces, control characters or backslashes"
	}
	rest := template.ReplaceAllString(p, "x")
	if strings.ContainsAny(rest, "{}") {
		return "has an unbalanced { or }"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return `must not contain "." or ".." segments`
		}
	}
	return ""
}

// version hashes what decides how an op of t is validated and sent: its class,
// schema, target, method and path. The target's connection (base_url, secret) is not
// part of it: it is the target's, current for every op.
func version(t *Tool) string {
	b, _ := json.Marshal(struct {
		Class, Target, Method, Path string
		Schema                      json.RawMessage
		Steps                       []vendorapi.Step `json:",omitempty"`
	}{t.Class, t.Target, t.Method, t.Path, t.InputSchema, t.Steps})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Names returns the tools' names, sorted.
func (c *Catalog) Names() []string { return sortedKeys(c.Tools) }
