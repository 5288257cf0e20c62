package fakestripe

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Stripe's metadata limits.
const (
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
)

// checkKnownParams refuses a parameter whose top-level name is not known, as
// Stripe answers parameter_unknown.
func checkKnownParams(form url.Values, known func(name string) bool) *apiError {
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		top, _, _ := strings.Cut(name, "[")
		if !known(top) {
			return invalidParam(name, "parameter_unknown", "Received unknown parameter: "+name)
		}
	}
	return nil
}

// formString returns the last value of name, and whether it was sent.
func formString(form url.Values, name string) (string, bool) {
	vs, ok := form[name]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// formInt parses an optional integer parameter.
func formInt(form url.Values, name string) (n int64, ok bool, err *apiError) {
	v, ok := formString(form, name)
	if !ok {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil {
		return 0, true, invalidParam(name, "parameter_invalid_integer", "Invalid integer: "+v)
	}
	return n, true, nil
}

// formBool parses an optional boolean parameter.
func formBool(form url.Values, name string) (bool, *apiError) {
	v, ok := formString(form, name)
	if !ok {
		return false, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalidParam(name, "", "Invalid boolean: "+v)
}

// formAmount parses a positive amount in the currency's minor unit.
func formAmount(form url.Values, name string, required bool) (int64, bool, *apiError) {
	n, ok, err := formInt(form, name)
	if err != nil {
		return 0, ok, err
	}
	if !ok {
		if required {
			return 0, false, invalidParam(name, "parameter_missing", "Missing required param: "+name+".")
		}
		return 0, false, nil
	}
	if n < 1 {
		return 0, true, invalidParam(name, "parameter_invalid_integer", "This value must be greater than or equal to 1.")
	}
	return n, true, nil
}

// formCurrency parses a three-letter ISO currency code, lower-cased as Stripe
// stores it.
func formCurrency(form url.Values) (string, *apiError) {
	v, ok := formString(form, "currency")
	if !ok || v == "" {
		return "", invalidParam("currency", "parameter_missing", "Missing required param: currency.")
	}
	v = strings.ToLower(v)
	if len(v) != 3 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyz") != "" {
		return "", invalidParam("currency", "", "Invalid currency: "+v+". Stripe currently supports these currencies: usd, eur, gbp, ...")
	}
	return v, nil
}

// formMetadata collects metadata[k]=v under Stripe's limits. Empty values are
// dropped, as Stripe treats them as "unset".
func formMetadata(form url.Values) (map[string]string, *apiError) {
	md := make(map[string]string)
	for name, vs := range form {
		if name == "metadata" {
			if len(vs) > 0 && vs[len(vs)-1] != "" {
				return nil, invalidParam("metadata", "", "Invalid hash")
			}
			continue
		}
		rest, ok := strings.CutPrefix(name, "metadata[")
		if !ok {
			continue
		}
		if !strings.HasSuffix(rest, "]") {
			return nil, invalidParam(name, "", "Invalid hash")
		}
		key := rest[:len(rest)-1]
		switch {
		case key == "":
			return nil, invalidParam(name, "", "Metadata keys must not be empty.")
		case strings.ContainsAny(key, "[]"):
			return nil, invalidParam(name, "", "Metadata keys may not contain square brackets ('[' and ']').")
		case utf8.RuneCountInString(key) > maxMetadataKeyLen:
			return nil, invalidParam(name, "", "Metadata key length can't exceed "+strconv.Itoa(maxMetadataKeyLen)+" characters.")
		}
		v := vs[len(vs)-1]
		if n := utf8.RuneCountInString(v); n > maxMetadataValueLen {
			return nil, invalidParam(name, "", "Metadata values can have up to "+strconv.Itoa(maxMetadataValueLen)+" characters, but you passed in a value that is "+strconv.Itoa(n)+" characters.")
		}
		if v != "" {
			md[key] = v
		}
	}
	if len(md) > maxMetadataKeys {
		return nil, invalidParam("metadata", "", "Invalid metadata: metadata can have up to "+strconv.Itoa(maxMetadataKeys)+" keys, but you passed in "+strconv.Itoa(len(md))+" keys.")
	}
	return md, nil
}

// createdFilter is the created[gte|gt|lte|lt] (or exact created) filter of a
// list, in Unix seconds.
type createdFilter struct {
	gte, gt, lte, lt *int64
}

// parseCreatedFilter reads created, created[gte], created[gt], created[lte]
// and created[lt].
func parseCreatedFilter(q url.Values) (createdFilter, *apiError) {
	var f createdFilter
	for name, dst := range map[string]**int64{
		"created[gte]": &f.gte, "created[gt]": &f.gt, "created[lte]": &f.lte, "created[lt]": &f.lt,
	} {
		n, ok, err := formInt(q, name)
		if err != nil {
			return f, err
		}
		if ok {
			*dst = &n
		}
	}
	n, ok, err := formInt(q, "created")
	if err != nil {
		return f, err
	}
	if ok {
		f.gte, f.lte = &n, &n
	}
	return f, nil
}

// match reports whether a created time passes the filter.
func (f createdFilter) match(created time.Time) bool {
	c := created.Unix()
	return (f.gte == nil || c >= *f.gte) && (f.gt == nil || c > *f.gt) &&
		(f.lte == nil || c <= *f.lte) && (f.lt == nil || c < *f.lt)
}

// parseLimit reads limit, 1..100, defaulting to 10.
func parseLimit(q url.Values) (int, *apiError) {
	n, ok, err := formInt(q, "limit")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 10, nil
	}
	if n < 1 || n > 100 {
		return 0, invalidParam("limit", "", "This value must be between 1 and 100 (it currently is "+strconv.FormatInt(n, 10)+").")
	}
	return int(n), nil
}

// nullable returns nil for "", so JSON shows null as Stripe does.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// copyMetadata returns a copy of md that is never nil.
func copyMetadata(md map[string]string) map[string]string {
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}
