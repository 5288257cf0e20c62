package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Fingerprint is the SHA-256 of the RFC 8785 (JCS) canonical JSON of
// {"tool": ..., "args": ...}. Key order, white space and number spelling do not change it.
type Fingerprint [sha256.Size]byte

// String returns the fingerprint in lower-case hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// ComputeFingerprint returns the fingerprint of a tool call. args must be valid JSON.
func ComputeFingerprint(tool string, args json.RawMessage) (Fingerprint, error) {
	doc, err := json.Marshal(struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}{tool, args})
	if err != nil {
		return Fingerprint{}, fmt.Errorf("fingerprint: args are not valid JSON: %w", err)
	}
	canon, err := jcs.Transform(doc)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("fingerprint: canonicalize: %w", err)
	}
	return sha256.Sum256(canon), nil
}
