package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// Entry is one row of the audit log.
type Entry struct {
	TenantID int64     `json:"tenant_id"`
	Seq      int64     `json:"seq"`
	Tx       uint64    `json:"tx"`
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	OpID     string    `json:"op_id,omitempty"`
	// Fingerprint is a call's fingerprint (its arguments' hash), nil for other kinds.
	Fingerprint []byte          `json:"fingerprint,omitempty"`
	Fields      json.RawMessage `json:"entry"`
	PrevHash    []byte          `json:"prev_hash,omitempty"`
	Hash        []byte          `json:"hash,omitempty"`
}

// Canonical returns the bytes of e that its hash covers: every field but the hashes,
// one per line, the time in UTC to the microsecond and the fields as Postgres prints
// the jsonb.
func (e *Entry) Canonical() []byte {
	b := make([]byte, 0, 128+len(e.Fields))
	b = strconv.AppendInt(b, e.TenantID, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, '\n')
	b = strconv.AppendUint(b, e.Tx, 10)
	b = append(b, '\n')
	b = e.At.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
	b = append(b, '\n')
	b = append(b, e.Kind...)
	b = append(b, '\n')
	b = append(b, e.OpID...)
	b = append(b, '\n')
	b = hex.AppendEncode(b, e.Fingerprint)
	b = append(b, '\n')
	return append(b, e.Fields...)
}

// Chain returns the hash of e following prev: sha256(prev || e.Canonical()).
func Chain(prev []byte, e *Entry) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(e.Canonical())
	return h.Sum(nil)
}

// Genesis is the prev_hash of a tenant's first entry: 32 zero bytes.
var Genesis = make([]byte, sha256.Size)
