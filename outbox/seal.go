package outbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// SealKeySize is the length of Config.SealKey: AES-256.
const SealKeySize = 32

// sealer encrypts the full arguments of tools with redaction, so that only their
// redacted form is ever stored in clear.
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != SealKeySize {
		return nil, fmt.Errorf("outbox: SealKey must be %d bytes, got %d", SealKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("outbox: seal key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("outbox: seal key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

func sealAAD(tenantID int64, key string) []byte {
	return []byte(strconv.FormatInt(tenantID, 10) + "\x00" + key)
}

func (s *sealer) seal(tenantID int64, key string, args json.RawMessage) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(args)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("outbox: seal nonce: %w", err)
	}
	return s.aead.Seal(nonce, nonce, args, sealAAD(tenantID, key)), nil
}

// errSealed is returned when sealed arguments cannot be opened (another key).
var errSealed = errors.New("sealed arguments cannot be opened with the configured seal key")

func (s *sealer) open(tenantID int64, key string, sealed []byte) (json.RawMessage, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no seal key is configured", errSealed)
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errSealed
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], sealAAD(tenantID, key))
	if err != nil {
		return nil, errSealed
	}
	return out, nil
}
