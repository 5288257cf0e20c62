package catalog

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkFields walks the file's YAML document against fileFormat and returns an *Error
// for the first key no format knows, naming the target, tool or upstream it is in and
// the nearest known key: `tool "helpdesk.create_ticket": unknown field "clas" (did you
// mean "class"?)`. Free-form maps (input_schema, headers, env, approval thresholds)
// are not walked.
func checkFields(file string, doc *yaml.Node) error {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil // the decoder says what is wrong with it
	}
	sections := map[string]string{"targets": "target", "tools": "tool", "upstreams": "upstream"}
	top := reflect.TypeFor[fileFormat]()
	for i := 0; i+1 < len(doc.Content); i += 2 {
		key, val := doc.Content[i].Value, doc.Content[i+1]
		kind, ok := sections[key]
		if !ok {
			return &Error{File: file, Message: unknownField(key, "", top)}
		}
		if val.Kind != yaml.MappingNode {
			continue
		}
		f, _ := fieldByTag(top, key)
		for j := 0; j+1 < len(val.Content); j += 2 {
			name := val.Content[j].Value
			if err := walkFields(val.Content[j+1], f.Type.Elem(), ""); err != nil {
				err.File, err.Kind, err.Name = file, kind, name
				return err
			}
		}
	}
	return nil
}

// walkFields checks the keys of n against the struct type t (or a pointer to one, or a
// map of them); path is the dotted field n is at within its target, tool or upstream.
func walkFields(n *yaml.Node, t reflect.Type, path string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		elem := t.Elem()
		for elem.Kind() == reflect.Pointer {
			elem = elem.Elem()
		}
		if elem.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := walkFields(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			f, ok := fieldByTag(t, key)
			if !ok {
				return &Error{Field: path, Message: unknownField(key, path, t)}
			}
			if err := walkFields(n.Content[i+1], f.Type, join(path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldByTag returns the field of struct t whose yaml tag is name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlName is the key of f in the file.
func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return tag
}

// unknownField says that key is not a field of t, with the nearest one t has.
func unknownField(key, path string, t reflect.Type) string {
	var known []string
	for i := range t.NumField() {
		if tag := yamlName(t.Field(i)); tag != "" && tag != "-" {
			known = append(known, tag)
		}
	}
	msg := fmt.Sprintf("unknown field %q", key)
	if s := nearest(key, known); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + " (known fields: " + strings.Join(known, ", ") + ")"
}

// nearest returns the word of words closest to s by edit distance, when it is close
// enough to be a likely typo ("" otherwise).
func nearest(s string, words []string) string {
	best, bestD := "", -1
	for _, w := range words {
		if d := editDistance(strings.ToLower(s), w); bestD < 0 || d < bestD {
			best, bestD = w, d
		}
	}
	if bestD < 0 || bestD > max(1, min(len(s), len(best))/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
