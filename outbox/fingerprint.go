package outbox

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Fingerprint identifies a tool call's payload: the SHA-256 of the RFC 8785 (JCS)
// canonical JSON of {"tool": ..., "args": ...}, or, for a tool with Redact when a seal
// key is configured, the HMAC-SHA256 of that JSON under a key derived from the seal key
// (so that whoever reads a fingerprint cannot confirm a guess of the redacted fields
// offline). Key order, white space and number spelling do not change it.
type Fingerprint [sha256.Size]byte

// String returns the fingerprint in lower-case hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// ComputeFingerprint returns the plain (unkeyed) fingerprint of a tool call. args must
// be valid JSON. Outbox.Fingerprint is the one stored and compared: it is keyed for
// tools with Redact.
func ComputeFingerprint(tool string, args json.RawMessage) (Fingerprint, error) {
	canon, err := canonicalCall(tool, args)
	if err != nil {
		return Fingerprint{}, err
	}
	return sha256.Sum256(canon), nil
}

// ComputeKeyedFingerprint returns the HMAC-SHA256 under key of the canonical JSON of a
// tool call. args must be valid JSON.
func ComputeKeyedFingerprint(key []byte, tool string, args json.RawMessage) (Fingerprint, error) {
	canon, err := canonicalCall(tool, args)
	if err != nil {
		return Fingerprint{}, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(canon)
	var f Fingerprint
	copy(f[:], mac.Sum(nil))
	return f, nil
}

func canonicalCall(tool string, args json.RawMessage) ([]byte, error) {
	doc, err := json.Marshal(struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}{tool, args})
	if err != nil {
		return nil, fmt.Errorf("fingerprint: args are not valid JSON: %w", err)
	}
	canon, err := jcs.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: canonicalize: %w", err)
	}
	return canon, nil
}

// fingerprintKey derives the key of keyed fingerprints from the seal key, apart from
// the keys derived from it for other uses.
func fingerprintKey(sealKey []byte) []byte {
	mac := hmac.New(sha256.New, sealKey)
	mac.Write([]byte("oncebox fingerprint key"))
	return mac.Sum(nil)
}

// Fingerprint returns the fingerprint an op of the tool is stored and compared under:
// keyed (ComputeKeyedFingerprint under a key derived from Config.SealKey) when the tool
// redacts its arguments and a seal key is configured, plain (ComputeFingerprint)
// otherwise. args must be valid JSON.
func (ob *Outbox) Fingerprint(tool string, args json.RawMessage) (Fingerprint, error) {
	if ob.keyedFingerprint(tool) {
		return ComputeKeyedFingerprint(ob.fpKey, tool, args)
	}
	return ComputeFingerprint(tool, args)
}

// keyedFingerprint reports whether the tool's ops get a keyed fingerprint.
func (ob *Outbox) keyedFingerprint(tool string) bool {
	if ob.fpKey == nil {
		return false
	}
	t, ok := ob.cfg.Tools.Lookup(tool)
	return ok && t.Redact != nil
}
