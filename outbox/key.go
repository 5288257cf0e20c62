package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/oncebox/oncebox/protocol"
)

// MaxKeyLength is the longest idempotency key accepted, in bytes (protocol's).
const MaxKeyLength = protocol.MaxKeyLength

// KeyError says why an idempotency key was refused: protocol.KeyError.
type KeyError = protocol.KeyError

// NormalizeKey trims surrounding white space from a caller's idempotency key and checks
// the rest: 1 to 255 bytes of visible ASCII (0x21 to 0x7E). It returns a *KeyError naming
// the broken rule otherwise. It is protocol.NormalizeKey, which the Go client applies too.
func NormalizeKey(raw string) (string, error) { return protocol.NormalizeKey(raw) }

// VendorKey derives the key oncebox sends to a vendor for one step of an op. It is a
// deterministic function of the tenant, the caller's idempotency key, the step (the tool
// name for single-step tools) and the generation, so retries, restarts and other
// processes derive the same one; it is never random. The result is 67 characters, well
// within Stripe's 255.
func VendorKey(tenantID int64, key, step string, generation int) string {
	h := sha256.New()
	h.Write([]byte("oncebox/v1\x00"))
	h.Write([]byte(strconv.FormatInt(tenantID, 10)))
	h.Write([]byte{0})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(step))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(generation)))
	return "ob_" + hex.EncodeToString(h.Sum(nil))
}
