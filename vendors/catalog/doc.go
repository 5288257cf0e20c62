// Package catalog loads a tool catalog: the operator's own tools, each a typed,
// classified call to an HTTP target, declared in one YAML file (JSON is valid YAML)
// given by --tools-file / ONCEBOX_TOOLS_FILE.
//
//	targets:
//	  helpdesk:
//	    base_url: https://helpdesk.example.com/api
//	    secret_header: X-Api-Key      # optional; the secret comes from the environment
//	    secret_env: HELPDESK_API_KEY
//	    native_keys: false            # the target honours Idempotency-Key
//	    lookup_path: /tickets/by-ref  # GET ?oncebox_op=<op id>; optional
//	tools:
//	  helpdesk.create_ticket:
//	    description: Open a support ticket for a customer.
//	    class: write                  # read | write | unsafe
//	    target: helpdesk
//	    method: POST                  # defaults to POST (GET for read tools)
//	    path: /customers/{customer_id}/tickets
//	    input_schema: {type: object, ...}   # JSON Schema 2020-12
//	    ttl: 72h                      # optional
//	    dedupe_window: 24h            # optional: MCP calls naming no conversation (default 24h, or the TTL if shorter; 0 turns it off)
//	    identity: [customer_id, order_ref]  # optional: the arguments that identify an op (default: all of them)
//
// identity (also on an upstream's tools) names the top-level arguments that say which
// operation a call asks for: within the dedupe window, an MCP call that agrees with an
// earlier one on them is that op, not executed again, even when its free text (a
// ticket's subject, a note's wording) differs; the model is told so, and "occurrence"
// asks for a deliberate second one. Each name must be a property of input_schema (of
// the schema the upstream lists, for an upstream tool).
//
// Load checks everything before the server starts: the file's fields (an unknown
// field is an error naming the nearest known one), every target (an absolute http(s) base URL, a secret variable
// that is set), every tool (a known class and target, a path whose {arg} templates
// name required string or integer properties, an input schema that compiles under
// draft 2020-12 with its root of type object, refers to nothing outside itself and
// requires only properties it declares). An error names the file, the tool or
// target, and the field.
//
// Classes:
//
//   - write: an op goes through the outbox exactly like webhook.post; the arguments
//     are sent as the JSON body (for GET and DELETE, the arguments a path template
//     does not use become the query).
//   - unsafe: as write, but every op starts in awaiting_approval and waits for a
//     person (tenant roles, POST /v1/ops/{key}/approve).
//   - read: no op, no key: Catalog.Read calls the target at once, with the target's
//     timeout, and returns its answer.
//
// The arguments are validated at enqueue against input_schema with
// github.com/santhosh-tekuri/jsonschema/v6; a refusal is an *vendorapi.ValidationError
// naming the field (such as "args.subject") and the rule (such as "maxLength").
// Path templates are filled with the escaped argument (url.PathEscape); an argument
// that fills one must be a single segment ("", ".", anything with "..", "/", "\\", "%"
// or a control character, or longer than 256 bytes, is refused at enqueue, naming the
// field), so a call never leaves its target.
//
// Dispatch reuses the webhook adapter (vendors/webhook): each target that write or
// unsafe tools use is one vendorapi.Vendor named "catalog_<target>", with the target's
// native keys and lookup path, so that the reconciler asks it like any webhook target.
// The tools of an upstream MCP server (upstreams:) are listed, called and classified
// through the upstream client (vendors/mcpupstream): the catalog decides which tools
// there are, their classes and arguments; the client speaks MCP.
//
// A tenant's own catalog is a file of the same format, loaded and checked alone, then
// merged beside the installation's (Merge): its tools, targets and upstreams carry the
// tenant, and only that tenant sees and calls its tools (vendorapi.Tool.Tenant). Names
// are one namespace across the installation: a tenant's may shadow none.
package catalog
