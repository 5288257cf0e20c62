package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oncebox/oncebox/vendorapi"
)

// maxAmount is the largest amount Stripe accepts, in minor units (eight digits).
const maxAmount = 99999999

// invalid returns the validation error for one field.
func invalid(field, message string) *vendorapi.ValidationError {
	return &vendorapi.ValidationError{Field: field, Message: message}
}

// fields is a JSON object read strictly: every key known and given once. Values
// are kept raw, with null values dropped (null counts as absent).
type fields struct {
	path   string
	keys   []string // in the order given, null values included
	values map[string]json.RawMessage
}

// readArgs reads the whole arguments of a tool call as a JSON object with the
// allowed keys.
func readArgs(args json.RawMessage, allowed []string) (fields, error) {
	if !json.Valid(args) {
		return fields{}, invalid("args", "must be a valid JSON object")
	}
	if !utf8.Valid(args) {
		return fields{}, invalid("args", "must be valid UTF-8")
	}
	return readObject("args", args, allowed)
}

// readObject reads raw, which must be valid JSON, as an object at path. A nil
// allowed accepts any key.
func readObject(path string, raw json.RawMessage, allowed []string) (fields, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fields{}, invalid(path, "must be a JSON object")
	}
	f := fields{path: path, values: make(map[string]json.RawMessage)}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fields{}, invalid(path, "must be a valid JSON object")
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fields{}, invalid(path, "must be a valid JSON object")
		}
		if allowed != nil && !slices.Contains(allowed, key) {
			return fields{}, invalid(f.at(key), "unknown field; allowed: "+strings.Join(allowed, ", "))
		}
		if slices.Contains(f.keys, key) {
			return fields{}, invalid(f.at(key), "is given more than once")
		}
		f.keys = append(f.keys, key)
		if v = bytes.TrimSpace(v); !bytes.Equal(v, []byte("null")) {
			f.values[key] = v
		}
	}
	return f, nil
}

// at returns the path of the field name.
func (f fields) at(name string) string { return f.path + "." + name }

// has reports whether name is given and not null.
func (f fields) has(name string) bool {
	_, ok := f.values[name]
	return ok
}

// str returns the string field name, "" when absent.
func (f fields) str(name string) (string, error) {
	raw, ok := f.values[name]
	if !ok {
		return "", nil
	}
	return readString(f.at(name), raw)
}

// nonEmpty returns the string field name, "" when absent; when present it must not
// be empty.
func (f fields) nonEmpty(name string) (string, error) {
	s, err := f.str(name)
	if err == nil && f.has(name) && s == "" {
		err = invalid(f.at(name), "must not be empty; leave it out instead")
	}
	return s, err
}

// required returns the string field name, which must be present and not empty.
func (f fields) required(name string) (string, error) {
	if !f.has(name) {
		return "", invalid(f.at(name), "is required")
	}
	s, err := f.str(name)
	if err == nil && s == "" {
		err = invalid(f.at(name), "is required and must not be empty")
	}
	return s, err
}

// boolean returns the boolean field name, false when absent.
func (f fields) boolean(name string) (bool, error) {
	raw, ok := f.values[name]
	if !ok {
		return false, nil
	}
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalid(f.at(name), "must be true or false")
}

// amount returns the amount field name, 0 when absent: an integer number of minor
// units from 1 to maxAmount, written as a JSON number without fraction or exponent.
func (f fields) amount(name string) (int64, error) {
	raw, ok := f.values[name]
	if !ok {
		return 0, nil
	}
	field := f.at(name)
	const positive = "must be an integer greater than 0"
	s := string(raw)
	switch {
	case s[0] == '"':
		return 0, invalid(field, positive+", given as a JSON number, not a string")
	case s[0] != '-' && (s[0] < '0' || s[0] > '9'):
		return 0, invalid(field, positive)
	case strings.ContainsAny(s, ".eE"):
		return 0, invalid(field, positive+", in the currency's minor units (no fraction or exponent)")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case s[0] == '-' || (err == nil && n == 0):
		return 0, invalid(field, positive)
	case err != nil || n > maxAmount:
		return 0, invalid(field, fmt.Sprintf("must be at most %d minor units (Stripe's limit)", maxAmount))
	}
	return n, nil
}

// readString decodes raw as a JSON string.
func readString(path string, raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", invalid(path, "must be a string")
	}
	return s, nil
}

// readArray decodes raw as a JSON array; null elements stay "null".
func readArray(path, what string, raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, invalid(path, "must be an array of "+what)
	}
	for i := range items {
		items[i] = bytes.TrimSpace(items[i])
	}
	return items, nil
}

// index returns the path of element i of the array at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// chars counts the characters (code points) of s, as Stripe and SendGrid do.
func chars(s string) int { return utf8.RuneCountInString(s) }
