package tools

import (
	"fmt"
	"strings"

	"github.com/oncebox/oncebox/vendorapi"
)

// Stripe's metadata limits; one of Stripe's 50 keys is kept for vendorapi.TagKey.
const (
	maxMetadataKeys     = 50 - 1
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
)

// maxStripeIDLen bounds the Stripe object ids an agent may pass.
const maxStripeIDLen = 255

// metadata reads the Stripe metadata field name of f, nil when absent.
func (f fields) metadata(name string) (map[string]string, error) {
	raw, ok := f.values[name]
	if !ok {
		return nil, nil
	}
	obj, err := readObject(f.at(name), raw, nil)
	if err != nil {
		return nil, err
	}
	if len(obj.keys) > maxMetadataKeys {
		return nil, invalid(obj.path, fmt.Sprintf("must have at most %d keys (Stripe allows 50 and oncebox keeps one for %q); got %d", maxMetadataKeys, vendorapi.TagKey, len(obj.keys)))
	}
	md := make(map[string]string, len(obj.keys))
	for _, k := range obj.keys {
		switch {
		case k == "":
			return nil, invalid(obj.path, "keys must not be empty")
		case k == vendorapi.TagKey:
			return nil, invalid(obj.at(k), "is reserved: oncebox tags every Stripe object with its op id under this key")
		case chars(k) > maxMetadataKeyLen:
			return nil, invalid(obj.at(k), fmt.Sprintf("key must be at most %d characters long", maxMetadataKeyLen))
		case strings.ContainsAny(k, "[]"):
			return nil, invalid(obj.at(k), "key must not contain square brackets")
		}
		if !obj.has(k) {
			return nil, invalid(obj.at(k), "must be a string, not null")
		}
		v, err := obj.str(k)
		if err != nil {
			return nil, err
		}
		if chars(v) > maxMetadataValueLen {
			return nil, invalid(obj.at(k), fmt.Sprintf("must be at most %d characters long; got %d", maxMetadataValueLen, chars(v)))
		}
		md[k] = v
	}
	return md, nil
}

// stripeID reads the Stripe object id field name of f, "" when absent. When
// present it must be a non-empty run of letters, digits and underscores starting
// with one of the prefixes (any prefix when none is given); what says what kind of
// id it is, for the message.
func (f fields) stripeID(name, what string, prefixes ...string) (string, error) {
	s, err := f.nonEmpty(name)
	if err != nil || s == "" {
		return s, err
	}
	example := what + " id"
	if len(prefixes) > 0 {
		example = fmt.Sprintf("%s id such as %q", what, prefixes[0]+"123")
	}
	ok := len(s) <= maxStripeIDLen
	for _, c := range []byte(s) {
		ok = ok && (c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
	}
	if ok && len(prefixes) > 0 {
		ok = false
		for _, p := range prefixes {
			ok = ok || (strings.HasPrefix(s, p) && len(s) > len(p))
		}
	}
	if !ok {
		return "", invalid(f.at(name), "must be a Stripe "+example)
	}
	return s, nil
}
