// Package storable refuses what Postgres cannot store before it reaches the database:
// JSON that jsonb cannot hold and text that a text column cannot (invalid UTF-8,
// U+0000). The outbox checks every document and text it stores with it, whatever the
// door (HTTP API, MCP, the Go library), and the console checks its query parameters,
// so that such input is refused as invalid instead of failing in the database.
package storable

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oncebox/oncebox/vendorapi"
)

// MaxJSONDepth bounds how deeply stored JSON may nest: Postgres' JSON parser recurses,
// and no tool needs more.
const MaxJSONDepth = 64

// Postgres' numeric, which jsonb uses for every number, holds at most 131072 digits
// before the decimal point and 16383 after it.
const (
	pgNumericMaxIntDigits  = 131072
	pgNumericMaxFracDigits = 16383
)

// CheckJSON refuses a valid JSON document that Postgres' jsonb cannot hold:
// invalid UTF-8, the character U+0000 or an unpaired surrogate escape in a string or
// a key, a number out of numeric's range, or nesting deeper than MaxJSONDepth. field
// names the document in the *ValidationError. Every entry point that stores JSON it
// was given (the HTTP API, MCP, the Go library) goes through this check, so that such
// input is refused as invalid instead of failing in the database.
func CheckJSON(field string, doc []byte) error {
	if !utf8.Valid(doc) {
		return &vendorapi.ValidationError{Field: field, Message: "must be valid UTF-8"}
	}
	depth := 0
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case c == '{' || c == '[':
			depth++
			if depth > MaxJSONDepth {
				return &vendorapi.ValidationError{Field: field, Message: fmt.Sprintf("nests deeper than %d levels", MaxJSONDepth)}
			}
		case c == '}' || c == ']':
			depth--
		case c == '"':
			end, msg := scanString(doc, i+1)
			if msg != "" {
				return &vendorapi.ValidationError{Field: field, Message: msg}
			}
			i = end
		case c == '-' || c >= '0' && c <= '9':
			end := i
			for end < len(doc) && strings.IndexByte("+-0123456789.eE", doc[end]) >= 0 {
				end++
			}
			if msg := checkNumber(string(doc[i:end])); msg != "" {
				return &vendorapi.ValidationError{Field: field, Message: msg}
			}
			i = end - 1
		}
	}
	return nil
}

// scanString checks the JSON string whose content starts at doc[start] and returns
// the index of its closing quote, or a message saying why Postgres cannot hold it.
func scanString(doc []byte, start int) (int, string) {
	pendingHigh := false
	for i := start; i < len(doc); i++ {
		c := doc[i]
		if c == '"' {
			if pendingHigh {
				return i, "must not contain an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff) in any string"
			}
			return i, ""
		}
		if c != '\\' {
			if pendingHigh {
				return i, "must not contain an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff) in any string"
			}
			continue
		}
		i++
		if i >= len(doc) {
			return i, "is not valid JSON"
		}
		if doc[i] != 'u' {
			if pendingHigh {
				return i, "must not contain an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff) in any string"
			}
			continue
		}
		if i+4 >= len(doc) {
			return i, "is not valid JSON"
		}
		var r rune
		for _, h := range doc[i+1 : i+5] {
			r <<= 4
			switch {
			case h >= '0' && h <= '9':
				r |= rune(h - '0')
			case h >= 'a' && h <= 'f':
				r |= rune(h-'a') + 10
			case h >= 'A' && h <= 'F':
				r |= rune(h-'A') + 10
			default:
				return i, "is not valid JSON"
			}
		}
		i += 4
		switch {
		case r == 0:
			return i, "must not contain the character U+0000 in any string or key"
		case r >= 0xD800 && r < 0xDC00:
			if pendingHigh {
				return i, "must not contain an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff) in any string"
			}
			pendingHigh = true
		case r >= 0xDC00 && r < 0xE000:
			if !pendingHigh {
				return i, "must not contain an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff) in any string"
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return i, "must not contain an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff) in any string"
			}
		}
	}
	return len(doc), "is not valid JSON"
}

// checkNumber says why Postgres' numeric cannot hold the JSON number lit, or "".
func checkNumber(lit string) string {
	mant, exp, hasExp := strings.Cut(strings.ToLower(lit), "e")
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	var e int64
	if hasExp {
		exp = strings.TrimPrefix(exp, "+")
		neg := strings.HasPrefix(exp, "-")
		exp = strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")
		if len(exp) > 9 {
			return outOfRange(lit)
		}
		for _, d := range exp {
			e = e*10 + int64(d-'0')
		}
		if neg {
			e = -e
		}
	}
	// Digits after the decimal point Postgres keeps (the display scale).
	if int64(len(frac))-e > pgNumericMaxFracDigits {
		return outOfRange(lit)
	}
	// Position of the most significant non-zero digit.
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return ""
	}
	intDigits := int64(len(digits)) - int64(len(frac)) + e
	if intDigits > pgNumericMaxIntDigits {
		return outOfRange(lit)
	}
	return ""
}

func outOfRange(lit string) string {
	if len(lit) > 32 {
		lit = lit[:32] + "…"
	}
	return fmt.Sprintf("holds the number %s, outside the range that can be stored (at most %d digits before the decimal point and %d after)",
		lit, pgNumericMaxIntDigits, pgNumericMaxFracDigits)
}

// CheckText refuses a text Postgres cannot store: invalid UTF-8 or the
// character U+0000. field names it in the *ValidationError.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) {
		return &vendorapi.ValidationError{Field: field, Message: "must be valid UTF-8"}
	}
	if strings.ContainsRune(s, 0) {
		return &vendorapi.ValidationError{Field: field, Message: "must not contain the character U+0000"}
	}
	return nil
}
