// Package seal encrypts what oncebox stores only sealed: the full arguments of tools
// with redaction (the outbox) and the tenants' own vendor keys (package vendoraccount),
// with the installation's seal key (AES-256-GCM, ONCEBOX_SEAL_KEY). What is sealed is
// bound to its tenant and to a name (an op's key, a vendor), so that a sealed value
// opens only where it was stored.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
)

// KeySize is the length of the seal key (outbox.Config.SealKey): AES-256.
const KeySize = 32

// Sealer seals and opens values with one seal key. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns the sealer of key, which must be KeySize bytes.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("outbox: SealKey must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("outbox: seal key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("outbox: seal key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

func aad(tenantID int64, name string) []byte {
	return []byte(strconv.FormatInt(tenantID, 10) + "\x00" + name)
}

// Seal returns value sealed for the tenant under name.
func (s *Sealer) Seal(tenantID int64, name string, value []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(value)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("outbox: seal nonce: %w", err)
	}
	return s.aead.Seal(nonce, nonce, value, aad(tenantID, name)), nil
}

// ErrSealed is returned when a sealed value cannot be opened (another key, another
// tenant or name, or no seal key at all).
var ErrSealed = errors.New("sealed arguments cannot be opened with the configured seal key")

// Open returns the value sealed for the tenant under name. A nil Sealer (no seal key)
// opens nothing.
func (s *Sealer) Open(tenantID int64, name string, sealed []byte) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no seal key is configured", ErrSealed)
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrSealed
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], aad(tenantID, name))
	if err != nil {
		return nil, ErrSealed
	}
	return out, nil
}
