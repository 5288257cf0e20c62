package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/oncebox/oncebox/vendorapi"
)

// printer renders the schema library's messages.
var printer = message.NewPrinter(language.English)

// Validate checks a call's arguments against the tool's input schema and its path
// templates. Its errors are *vendorapi.ValidationError naming the field ("args.subject")
// and the rule ("maxLength").
func (t *Tool) Validate(args json.RawMessage) error {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return &vendorapi.ValidationError{Field: "args", Message: "must be a JSON object"}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return &vendorapi.ValidationError{Field: "args", Message: "must be a JSON object: " + err.Error()}
	}
	if m, ok := inst.(map[string]any); ok && t.TagArgument != "" {
		if _, sent := m[t.TagArgument]; sent {
			return &vendorapi.ValidationError{Field: "args." + t.TagArgument, Rule: RuleTagArgument,
				Message: "is set by oncebox (the tool's tag_argument: it receives the op id); leave it out"}
		}
	}
	if err := t.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return schemaRefusal(ve)
		}
		return &vendorapi.ValidationError{Field: "args", Message: err.Error()}
	}
	_, err = t.fillPath(inst.(map[string]any))
	return err
}

// RuleTagArgument is the rule of a refused call that sets the tool's tag argument,
// which oncebox fills with the op id (vendorapi.ValidationError.Rule).
const RuleTagArgument = "tag_argument"

// schemaRefusal turns the library's error tree into one refusal: the first, deepest
// cause, with the field it is about and the keyword it breaks.
func schemaRefusal(ve *jsonschema.ValidationError) *vendorapi.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := slices.Clone(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			loc = append(loc, k.Missing[0])
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			loc = append(loc, k.Properties[0])
		}
	}
	rule := "schema"
	if kw := ve.ErrorKind.KeywordPath(); len(kw) > 0 {
		rule = kw[0]
	}
	msg := strings.TrimPrefix(ve.ErrorKind.LocalizedString(printer), rule+": ")
	return &vendorapi.ValidationError{Field: fieldPath(loc), Message: fmt.Sprintf("breaks the input_schema rule %s: %s", rule, msg)}
}

// fieldPath writes an instance location as oncebox names fields: args.to[2].email.
func fieldPath(loc []string) string {
	var b strings.Builder
	b.WriteString("args")
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
		} else {
			b.WriteString("." + tok)
		}
	}
	return b.String()
}

// fillPath returns the tool's path with its templates filled by escaped arguments.
func (t *Tool) fillPath(args map[string]any) (string, error) {
	path := t.Path
	for _, p := range t.params {
		var s string
		switch v := args[p].(type) {
		case string:
			s = v
		case json.Number:
			s = v.String()
		case float64:
			s = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return "", &vendorapi.ValidationError{Field: "args." + p, Message: "must be a string or an integer (it is a path segment)"}
		}
		if msg := checkSegment(s); msg != "" {
			return "", &vendorapi.ValidationError{Field: "args." + p, Message: msg}
		}
		path = strings.ReplaceAll(path, "{"+p+"}", url.PathEscape(s))
	}
	return path, nil
}

// maxSegmentBytes bounds one argument filled into a path.
const maxSegmentBytes = 256

// checkSegment returns why s cannot fill a {arg} of a path, or "": it must be one
// segment, so that a call never leaves the path its tool names (no "/", "\\", "..",
// "%", control or space characters, not empty or "."), refused at enqueue with the
// field's name rather than at dispatch.
func checkSegment(s string) string {
	switch {
	case s == "" || s == ".":
		return `must not be empty or "." (it is a path segment)`
	case len(s) > maxSegmentBytes:
		return fmt.Sprintf("must be at most %d bytes long (it is a path segment)", maxSegmentBytes)
	case strings.Contains(s, ".."):
		return `must not contain ".." (it is a path segment)`
	case strings.ContainsAny(s, "/\\%"):
		return `must not contain "/", "\\" or "%" (it is one path segment)`
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) && r != ' ' }):
		return "must not contain control characters (it is a path segment)"
	}
	return ""
}

// request is what the webhook adapter sends for a call: the method, the filled
// path (with the query for GET and DELETE) and the body.
type request struct {
	Target string          `json:"target"`
	Path   string          `json:"path"`
	Method string          `json:"method"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// request builds the webhook adapter's arguments for a call whose args passed
// Validate.
func (t *Tool) request(args json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode %s arguments: %w", t.Name, err)
	}
	path, err := t.fillPath(m)
	if err != nil {
		return nil, err
	}
	r := request{Target: t.Target, Path: path, Method: t.Method}
	if t.Method == "GET" || t.Method == "DELETE" {
		q := url.Values{}
		for k, v := range m {
			if slices.Contains(t.params, k) || v == nil {
				continue
			}
			switch v := v.(type) {
			case string:
				q.Set(k, v)
			case json.Number:
				q.Set(k, v.String())
			case bool:
				q.Set(k, strconv.FormatBool(v))
			default:
				b, _ := json.Marshal(v)
				q.Set(k, string(b))
			}
		}
		if len(q) > 0 {
			r.Path += "?" + q.Encode()
		}
	} else {
		r.Body = args
	}
	return json.Marshal(r)
}
