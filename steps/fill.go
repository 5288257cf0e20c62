package steps

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// fillArgs builds a step's arguments from its template and doc (see Step.Args).
func fillArgs(template json.RawMessage, doc any) (json.RawMessage, error) {
	if len(template) == 0 {
		return json.RawMessage("{}"), nil
	}
	var t any
	if err := json.Unmarshal(template, &t); err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	v, err := fill(t, doc, "args")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// fill replaces every {"$from": pointer} in v by what the pointer names in doc.
func fill(v, doc any, at string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if p, ok := x["$from"].(string); ok && len(x) == 1 {
			got, found := pointer(doc, p)
			if !found {
				return nil, fmt.Errorf("%s: $from %q names nothing", at, p)
			}
			return got, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			f, err := fill(e, doc, at+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			f, err := fill(e, doc, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	}
	return v, nil
}

// pointer resolves the JSON pointer p (RFC 6901) in doc.
func pointer(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// truthy says whether a when pointer lets its step run: it names a value other than
// null and false.
func truthy(doc any, p string) bool {
	v, ok := pointer(doc, p)
	return ok && v != nil && v != false
}
