package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is what Verify and Export read with: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Report is what Verify found.
type Report struct {
	// Sealed and Unsealed count the tenant's entries (unsealed: not chained yet).
	Sealed, Unsealed int
	// Checkpoints counts the checkpoints checked; Unsigned those without a signature.
	Checkpoints, Unsigned int
	// Mismatch names the first entry or checkpoint that does not match (nil: none).
	Mismatch *Mismatch
}

// Mismatch is the first entry (or checkpoint) whose hash does not match.
type Mismatch struct {
	Entry  *Entry
	Reason string
}

// Error implements error.
func (m *Mismatch) Error() string {
	if m.Entry == nil {
		return m.Reason
	}
	return fmt.Sprintf("entry seq %d (%s, op %q, at %s) %s", m.Entry.Seq, m.Entry.Kind, m.Entry.OpID,
		m.Entry.At.UTC().Format(time.RFC3339), m.Reason)
}

// Verify recomputes tenant's chain and checks its checkpoints: their head hash is the
// hash of the entry they name, and their signature is valid under publicKey (when nil,
// under the key stored with the checkpoint).
func Verify(ctx context.Context, q Querier, tenant int64, publicKey ed25519.PublicKey) (*Report, error) {
	entries, err := readChain(ctx, q, tenant)
	if err != nil {
		return nil, err
	}
	return verifyChain(ctx, q, tenant, publicKey, entries)
}

// readChain reads tenant's entries in chain order.
func readChain(ctx context.Context, q Querier, tenant int64) ([]*Entry, error) {
	rows, err := q.Query(ctx, sqlChain, tenant)
	if err != nil {
		return nil, fmt.Errorf("audit: read the chain: %w", err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, fmt.Errorf("audit: read the chain: %w", err)
	}
	return entries, nil
}

// verifyChain is Verify on entries, tenant's chain as readChain read it.
func verifyChain(ctx context.Context, q Querier, tenant int64, publicKey ed25519.PublicKey, entries []*Entry) (*Report, error) {
	r := &Report{}
	bySeq := map[int64]*Entry{}
	var prev []byte
	for i, e := range entries {
		if e.Hash == nil {
			r.Unsealed++
			continue
		}
		if r.Unsealed > 0 && r.Mismatch == nil {
			r.Mismatch = &Mismatch{Entry: e, Reason: "is sealed after an entry that is not"}
		}
		r.Sealed++
		bySeq[e.Seq] = e
		if i == 0 {
			// The first entry kept: a tenant's first, or the first after retention dropped older months.
			prev = e.PrevHash
		}
		if r.Mismatch == nil && !bytes.Equal(e.PrevHash, prev) {
			r.Mismatch = &Mismatch{Entry: e, Reason: "does not follow the entry before it (one was removed, added or edited with its hash)"}
		}
		if r.Mismatch == nil && !bytes.Equal(Chain(e.PrevHash, e), e.Hash) {
			r.Mismatch = &Mismatch{Entry: e, Reason: "does not match its hash (it was edited after it was sealed)"}
		}
		prev = e.Hash
	}
	if err := checkCheckpoints(ctx, q, tenant, publicKey, bySeq, r); err != nil {
		return nil, err
	}
	return r, nil
}

func checkCheckpoints(ctx context.Context, q Querier, tenant int64, publicKey ed25519.PublicKey, bySeq map[int64]*Entry, r *Report) error {
	rows, err := q.Query(ctx, sqlCheckpoints, tenant)
	if err != nil {
		return fmt.Errorf("audit: read checkpoints: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, tx, entries int64
		var headHash, pub, sig []byte
		var at time.Time
		if err := rows.Scan(&seq, &tx, &entries, &headHash, &at, &pub, &sig); err != nil {
			return fmt.Errorf("audit: read checkpoints: %w", err)
		}
		r.Checkpoints++
		if sig == nil {
			r.Unsigned++
		}
		if r.Mismatch != nil {
			continue
		}
		if e, ok := bySeq[seq]; ok && !bytes.Equal(e.Hash, headHash) {
			r.Mismatch = &Mismatch{Entry: e, Reason: fmt.Sprintf("does not match the checkpoint of %s (the chain up to it was rewritten)", at.UTC().Format(time.RFC3339))}
			continue
		}
		if sig == nil {
			continue
		}
		key := publicKey
		if key == nil {
			key = pub
		}
		if len(key) != ed25519.PublicKeySize || !ed25519.Verify(key, CheckpointMessage(tenant, entries, seq, headHash), sig) {
			r.Mismatch = &Mismatch{Reason: fmt.Sprintf("the checkpoint of %s (entry seq %d) has a signature the key does not verify", at.UTC().Format(time.RFC3339), seq)}
		}
	}
	return rows.Err()
}
