package vendorapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

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
