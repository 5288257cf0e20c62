package catalog_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/catalog"
)

const goodCatalog = `
targets:
  helpdesk:
    base_url: https://helpdesk.example.com/api
    secret_header: X-Api-Key
    secret_env: HELPDESK_API_KEY
    lookup_path: /_lookup
tools:
  helpdesk.create_ticket:
    description: Open a support ticket for a customer.
    class: write
    target: helpdesk
    path: /customers/{customer_id}/tickets
    input_schema:
      type: object
      properties:
        customer_id: {type: string}
        subject: {type: string, maxLength: 20}
        priority: {type: integer, minimum: 1, maximum: 5}
        tags: {type: array, items: {type: string, pattern: "^[a-z]+$"}}
      required: [customer_id, subject]
      additionalProperties: false
  helpdesk.find_ticket:
    description: Find a ticket.
    class: read
    target: helpdesk
    path: /tickets/{id}
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
`

func env(name string) string {
	if name == "HELPDESK_API_KEY" {
		return "hk-secret"
	}
	return ""
}

func TestParseGoodCatalog(t *testing.T) {
	t.Parallel()
	c, err := catalog.Parse("tools.yaml", []byte(goodCatalog), env)
	require.NoError(t, err)
	require.Equal(t, []string{"helpdesk.create_ticket", "helpdesk.find_ticket"}, c.Names())
	require.Equal(t, "hk-secret", c.Targets["helpdesk"].Secret)
	ct := c.Tools["helpdesk.create_ticket"]
	require.Equal(t, "POST", ct.Method)
	require.Equal(t, "GET", c.Tools["helpdesk.find_ticket"].Method)
	require.NotEmpty(t, ct.Version)
	require.JSONEq(t, `"object"`, string(mustField(t, ct.InputSchema, "type")))

	// owned names path templates whose objects must be the tenant's.
	owned, err := catalog.Parse("tools.yaml", []byte(strings.Replace(goodCatalog, "class: write", "class: write\n    owned: [customer_id]", 1)), env)
	require.NoError(t, err)
	require.Equal(t, []string{"customer_id"}, owned.Tools["helpdesk.create_ticket"].Owned)
	rt, err := owned.Connect(catalog.Options{})
	require.NoError(t, err)
	for _, ot := range rt.Tools(0) {
		require.Equal(t, []vendorapi.ObjectArg{{Arg: "customer_id"}}, ot.Objects, ot.Name)
	}

	// JSON is valid YAML.
	var asMap map[string]any
	_ = asMap
	jsonCat := `{"targets":{"t":{"base_url":"http://127.0.0.1:1"}},"tools":{"t.x":{"description":"d","class":"write","target":"t","path":"/x","input_schema":{"type":"object"}}}}`
	_, err = catalog.Parse("tools.json", []byte(jsonCat), env)
	require.NoError(t, err)
}

func mustField(t *testing.T, raw json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m[name]
}

// TestBrokenCatalogNamesFileToolAndField: each broken catalog is refused with the
// file, the tool (or target) and the field in the error.
func TestBrokenCatalogNamesFileToolAndField(t *testing.T) {
	t.Parallel()
	replace := func(old, new string) string {
		require.Contains(t, goodCatalog, old)
		return strings.Replace(goodCatalog, old, new, 1)
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"bad schema type", replace("priority: {type: integer", "priority: {type: intger"), `tools.yaml: tool "helpdesk.create_ticket": field input_schema: not a valid JSON Schema 2020-12 at /properties/priority/type`},
		{"schema not an object", replace("input_schema: {type: object, properties: {id", "input_schema: {type: array, properties: {id"), `tools.yaml: tool "helpdesk.find_ticket": field input_schema: must have "type: object"`},
		{"bad class", replace("class: write", "class: writ"), `tools.yaml: tool "helpdesk.create_ticket": field class: "writ" is not read, write or unsafe`},
		{"unknown target", replace("target: helpdesk\n    path: /customers", "target: nowhere\n    path: /customers"), `tools.yaml: tool "helpdesk.create_ticket": field target: "nowhere" is not a target`},
		{"template not required", replace("required: [customer_id, subject]", "required: [subject]"), `tools.yaml: tool "helpdesk.create_ticket": field path: template {customer_id} must name a required property`},
		{"path climbs", replace("path: /customers/{customer_id}/tickets", "path: /../admin"), `tools.yaml: tool "helpdesk.create_ticket": field path: must not contain "." or ".."`},
		{"path is a URL", replace("path: /customers/{customer_id}/tickets", "path: //evil.example.com/x"), `field path: must start with a single "/"`},
		{"unknown field", replace("class: write", "clas: write"), `tools.yaml: tool "helpdesk.create_ticket": unknown field "clas" (did you mean "class"?)`},
		{"unknown nested field", replace("class: write", "class: write\n    approval: {mod: always}"), `tools.yaml: tool "helpdesk.create_ticket": field approval: unknown field "mod" (did you mean "mode"?)`},
		{"unknown target field", replace("lookup_path:", "lookup_pat:"), `tools.yaml: target "helpdesk": unknown field "lookup_pat" (did you mean "lookup_path"?)`},
		{"unknown field, nothing near", replace("class: write", "class: write\n    colour: blue"), `tools.yaml: tool "helpdesk.create_ticket": unknown field "colour" (known fields: description, class,`},
		{"unknown section", "tool:\n  x: {}\n", `tools.yaml: unknown field "tool" (did you mean "tools"?)`},
		{"secret not set", replace("HELPDESK_API_KEY", "NOT_SET_ANYWHERE"), `tools.yaml: target "helpdesk": field secret_env: the environment variable NOT_SET_ANYWHERE is not set`},
		{"base url", replace("https://helpdesk.example.com/api", "ftp://x"), `tools.yaml: target "helpdesk": field base_url: must be an absolute http or https URL`},
		{"builtin prefix", replace("helpdesk.create_ticket:", "webhook.create:"), `tools.yaml: tool "webhook.create": the prefixes`},
		{"bad ttl", replace("class: write", "class: write\n    ttl: forever"), `tools.yaml: tool "helpdesk.create_ticket": field ttl: "forever" is not a positive duration`},
		{"bad approval", replace("class: write", "class: write\n    approval: {mode: sometimes}"), `tools.yaml: tool "helpdesk.create_ticket": field approval:`},
		{"approval on a read tool", replace("class: read", "class: read\n    approval: {mode: always}"), `tools.yaml: tool "helpdesk.find_ticket": field class: a read tool makes no op`},
		{"remote ref", replace("tags: {type: array", `tags: {$ref: "https://example.com/s.json", type: array`), `tools.yaml: tool "helpdesk.create_ticket": field input_schema: $ref "https://example.com/s.json" at /properties/tags: external references are not allowed`},
		{"file ref", replace("tags: {type: array", `tags: {$ref: "defs.json#/tag", type: array`), `field input_schema: $ref "defs.json#/tag" at /properties/tags: external references are not allowed`},
		{"owned names no template", replace("class: write", "class: write\n    owned: [subject]"), `tools.yaml: tool "helpdesk.create_ticket": field owned: "subject" is not a {template} of the tool's path`},
		{"owned twice", replace("class: write", "class: write\n    owned: [customer_id, customer_id]"), `field owned: names "customer_id" twice`},
		{"owned on a read tool", replace("class: read", "class: read\n    owned: [id]"), `tools.yaml: tool "helpdesk.find_ticket": field class: a read tool makes no op: ttl, dedupe_window, identity, owned`},
		{"required names no property", replace("required: [customer_id, subject]", "required: [customer_id, subjct]"), `tools.yaml: tool "helpdesk.create_ticket": field input_schema: required names "subjct", which is not one of its properties (customer_id, priority, subject, tags): did you mean "subject"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.Parse("tools.yaml", []byte(tc.file), env)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			var ce *catalog.Error
			require.True(t, errors.As(err, &ce))
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(goodCatalog, "class: write", "class: nope", 1)), 0o600))
	_, err := catalog.Load(path, env)
	require.ErrorContains(t, err, path+`: tool "helpdesk.create_ticket": field class:`)
	_, err = catalog.Load(filepath.Join(t.TempDir(), "missing.yaml"), env)
	require.ErrorContains(t, err, "missing.yaml: cannot read the tool catalog")
}

// TestValidateNamesFieldAndRule: a schema violation is an *vendorapi.ValidationError
// naming the field and the rule.
func TestValidateNamesFieldAndRule(t *testing.T) {
	t.Parallel()
	c, err := catalog.Parse("tools.yaml", []byte(goodCatalog), env)
	require.NoError(t, err)
	tool := c.Tools["helpdesk.create_ticket"]
	require.NoError(t, tool.Validate(json.RawMessage(`{"customer_id":"c1","subject":"Broken"}`)))
	for _, tc := range []struct{ args, field, rule string }{
		{`{"customer_id":"c1"}`, "args.subject", "required"},
		{`{"customer_id":"c1","subject":"a subject that is far too long"}`, "args.subject", "maxLength"},
		{`{"customer_id":"c1","subject":"s","priority":9}`, "args.priority", "maximum"},
		{`{"customer_id":"c1","subject":"s","priority":"high"}`, "args.priority", "type"},
		{`{"customer_id":"c1","subject":"s","tags":["ok","NO"]}`, "args.tags[1]", "pattern"},
		{`{"customer_id":"c1","subject":"s","extra":1}`, "args.extra", "additionalProperties"},
		{`{"customer_id":"..","subject":"s"}`, "args.customer_id", "path segment"},
		{`[1]`, "args", "JSON object"},
	} {
		err := tool.Validate(json.RawMessage(tc.args))
		var ve *vendorapi.ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", tc.args, err)
		require.Equal(t, tc.field, ve.Field, tc.args)
		require.Contains(t, ve.Message, tc.rule, tc.args)
	}
}

// TestLocalRefsAndDeclaredRequiredLoad: a $ref within the schema is fine, and so is a
// required list whose properties come from allOf.
func TestLocalRefsAndDeclaredRequiredLoad(t *testing.T) {
	t.Parallel()
	file := `
targets:
  t: {base_url: "http://127.0.0.1:1"}
tools:
  t.x:
    description: d
    class: write
    target: t
    path: /x
    input_schema:
      type: object
      $defs: {name: {type: string, maxLength: 10}}
      properties: {who: {$ref: "#/$defs/name"}}
      required: [who]
  t.y:
    description: d
    class: write
    target: t
    path: /y
    input_schema:
      type: object
      allOf: [{properties: {who: {type: string}}}]
      required: [who]
`
	c, err := catalog.Parse("tools.yaml", []byte(file), env)
	require.NoError(t, err)
	require.Error(t, c.Tools["t.x"].Validate(json.RawMessage(`{"who":"far too long a name"}`)), "the local $ref applies")
}
