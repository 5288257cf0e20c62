package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLength is the longest idempotency key accepted, in bytes.
const MaxKeyLength = 255

// ErrInvalidKey is matched by every *KeyError.
var ErrInvalidKey = errors.New("invalid idempotency key")

// KeyError says why an idempotency key was refused. Rule is a stable machine-readable
// name of the broken rule.
type KeyError struct {
	// Rule is one of "missing", "too_long" or "not_visible_ascii".
	Rule string
	// Detail is a human sentence.
	Detail string
}

// Error implements error.
func (e *KeyError) Error() string { return "idempotency key: " + e.Detail }

// Is makes errors.Is(err, ErrInvalidKey) true for every KeyError.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

// The prefixes of the keys oncebox's MCP server mints for its tool calls: a key minted
// for a conversation's call (MCPKeyPrefix) and one opened for a dedupe window
// (MCPWindowKeyPrefix). An HTTP caller may not send a key beginning with either (rule
// "reserved"): it could plant an op under a conversation's future key.
const (
	MCPKeyPrefix       = "mcp_"
	MCPWindowKeyPrefix = "mcpw_"
)

// MintedByMCP says whether key begins with a prefix the MCP server mints keys under.
func MintedByMCP(key string) bool {
	return strings.HasPrefix(key, MCPKeyPrefix) || strings.HasPrefix(key, MCPWindowKeyPrefix)
}

// NormalizeKey trims surrounding white space from a caller's idempotency key and checks
// the rest: 1 to 255 bytes of visible ASCII (0x21 to 0x7E). It returns a *KeyError naming
// the broken rule otherwise.
func NormalizeKey(raw string) (string, error) {
	key := strings.TrimSpace(raw)
	if key == "" {
		return "", &KeyError{Rule: "missing", Detail: "is empty; send 1 to 255 visible ASCII characters"}
	}
	if len(key) > MaxKeyLength {
		return "", &KeyError{Rule: "too_long", Detail: fmt.Sprintf("is %d bytes long; the limit is %d", len(key), MaxKeyLength)}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return "", &KeyError{Rule: "not_visible_ascii", Detail: fmt.Sprintf("byte %d (%q) is not visible ASCII; use characters from '!' to '~' with no inner spaces", i, rune(c))}
		}
	}
	return key, nil
}
