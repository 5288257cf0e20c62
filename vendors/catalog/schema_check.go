package catalog

import (
	"fmt"
	"strings"
)

// externalRef returns why schema refers outside itself, or "": a $ref or $dynamicRef
// that is not a fragment ("#/$defs/...") would be loaded from a file or the network.
func externalRef(v any, at string) string {
	switch v := v.(type) {
	case map[string]any:
		for _, kw := range []string{"$ref", "$dynamicRef"} {
			if ref, ok := v[kw].(string); ok && !strings.HasPrefix(ref, "#") {
				where := at
				if where == "" {
					where = "/"
				}
				return fmt.Sprintf("%s %q at %s: external references are not allowed (a tool's schema is whole in itself: put the definition under $defs and refer to it as \"#/$defs/<name>\")",
					kw, ref, where)
			}
		}
		for _, k := range sortedKeys(v) {
			if msg := externalRef(v[k], at+"/"+k); msg != "" {
				return msg
			}
		}
	case []any:
		for i, e := range v {
			if msg := externalRef(e, fmt.Sprintf("%s/%d", at, i)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// undeclaredRequired returns why an object schema's required list names a property it
// does not declare, or "": checked where the schema lists its properties and nothing
// else (allOf, $ref, patternProperties...) may declare more.
func undeclaredRequired(s map[string]any, at string) string {
	props, hasProps := s["properties"].(map[string]any)
	open := false
	for _, kw := range []string{"allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas", "patternProperties"} {
		if _, ok := s[kw]; ok {
			open = true
		}
	}
	if req, ok := s["required"].([]any); ok && hasProps && !open {
		for _, r := range req {
			name, _ := r.(string)
			if _, ok := props[name]; ok {
				continue
			}
			where := "required"
			if at != "" {
				where = at + "/required"
			}
			msg := fmt.Sprintf("%s names %q, which is not one of its properties (%s)", where, name, propertyList(props))
			if near := nearest(name, sortedKeys(props)); near != "" {
				msg += fmt.Sprintf(": did you mean %q?", near)
			}
			return msg
		}
	}
	for _, k := range sortedKeys(props) {
		if sub, ok := props[k].(map[string]any); ok {
			if msg := undeclaredRequired(sub, at+"/properties/"+k); msg != "" {
				return msg
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		if msg := undeclaredRequired(items, at+"/items"); msg != "" {
			return msg
		}
	}
	return ""
}
