package catalog

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Redaction is what an upstream tool's ops keep hidden once settled: the fields named
// by dotted paths ("to", "structuredContent.to", "content.text"; an array on the way
// applies the rest of the path to each element) are replaced by the hash of the value's
// JSON and its size: a string by "[redacted hmac-sha256:<hex>, N bytes]", any other
// value by {"redacted":"hmac-sha256:<hex>","bytes":N} (sha256: without a seal key).
// The rest keeps its bytes and order.
type Redaction struct {
	// Args are paths in the op's arguments.
	Args []string
	// Result are paths in the op's stored CallToolResult.
	Result []string
}

type redactFormat struct {
	Args   []string `yaml:"args"`
	Result []string `yaml:"result"`
}

// checkPaths returns why a path is not acceptable, or "".
func checkPaths(paths []string) string {
	for _, p := range paths {
		if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
			return `"` + p + `" is not a dotted path of field names, such as to or structuredContent.to`
		}
	}
	return ""
}

// redactor replaces the values at paths.
type redactor struct {
	paths [][]string
	key   []byte
}

func newRedactor(paths []string, key []byte) func(json.RawMessage) json.RawMessage {
	if len(paths) == 0 {
		return nil
	}
	r := &redactor{key: key}
	for _, p := range paths {
		r.paths = append(r.paths, strings.Split(p, "."))
	}
	return func(raw json.RawMessage) json.RawMessage {
		if len(raw) == 0 || !json.Valid(raw) {
			return raw
		}
		return r.value(raw, r.paths)
	}
}

// value redacts raw at paths (relative to raw).
func (r *redactor) value(raw json.RawMessage, paths [][]string) json.RawMessage {
	for _, p := range paths {
		if len(p) == 0 {
			return r.marker(raw)
		}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return raw
	}
	switch raw[0] {
	case '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			return raw
		}
		var out bytes.Buffer
		out.WriteByte('{')
		for first := true; dec.More(); first = false {
			tok, err := dec.Token()
			if err != nil {
				return raw
			}
			k, _ := tok.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return raw
			}
			var sub [][]string
			for _, p := range paths {
				if p[0] == k {
					sub = append(sub, p[1:])
				}
			}
			if len(sub) > 0 {
				v = r.value(v, sub)
			}
			if !first {
				out.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			out.Write(kb)
			out.WriteByte(':')
			out.Write(v)
		}
		out.WriteByte('}')
		return out.Bytes()
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return raw
		}
		var out bytes.Buffer
		out.WriteByte('[')
		for i, e := range elems {
			if i > 0 {
				out.WriteByte(',')
			}
			out.Write(r.value(e, paths))
		}
		out.WriteByte(']')
		return out.Bytes()
	}
	return raw
}

// marker replaces a value: its hash and size, as a string for a string (so that a
// CallToolResult stays one: a text content's text is a string), else as an object. A
// marker is kept as it is, so that redacting twice changes nothing.
func (r *redactor) marker(raw json.RawMessage) json.RawMessage {
	var m struct {
		Redacted string `json:"redacted"`
		Bytes    *int   `json:"bytes"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Bytes != nil && (strings.HasPrefix(m.Redacted, "sha256:") || strings.HasPrefix(m.Redacted, "hmac-sha256:")) {
		return raw
	}
	var str string
	isString := json.Unmarshal(raw, &str) == nil
	if isString && strings.HasPrefix(str, "[redacted ") {
		return raw
	}
	var sum []byte
	prefix := "sha256:"
	if r.key != nil {
		mac := hmac.New(sha256.New, r.key)
		mac.Write(raw)
		sum, prefix = mac.Sum(nil), "hmac-sha256:"
	} else {
		s := sha256.Sum256(raw)
		sum = s[:]
	}
	hash := prefix + hex.EncodeToString(sum)
	if isString {
		b, _ := json.Marshal(fmt.Sprintf("[redacted %s, %d bytes]", hash, len(raw)))
		return b
	}
	b, _ := json.Marshal(struct {
		Redacted string `json:"redacted"`
		Bytes    int    `json:"bytes"`
	}{hash, len(raw)})
	return b
}
