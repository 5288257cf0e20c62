package audit

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures a Sealer.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// SigningKey signs checkpoints. Defaults to none: checkpoints are unsigned.
	SigningKey ed25519.PrivateKey
	// Interval is how often Run seals. Defaults to 5 seconds.
	Interval time.Duration
	// CheckpointEvery is the least time between two checkpoints of a tenant. Defaults to
	// 1 hour.
	CheckpointEvery time.Duration
	// Retention is how long entries are kept, dropped by whole months. Defaults to 400
	// days.
	Retention time.Duration
	// Batch is how many entries of a tenant one round seals at most. Defaults to 5,000.
	Batch int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// WithDefaults returns c with its defaults filled in.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = time.Hour
	}
	if c.Retention <= 0 {
		c.Retention = 400 * 24 * time.Hour
	}
	if c.Batch <= 0 {
		c.Batch = 5000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Sealer chains the audit log's entries and writes its checkpoints.
type Sealer struct{ cfg Config }

// NewSealer returns a Sealer for cfg.
func NewSealer(cfg Config) *Sealer { return &Sealer{cfg: cfg.WithDefaults()} }

// Run seals every Interval and keeps the partitions (Maintain every hour) until ctx ends.
// Every process may run it: one seals at a time (an advisory lock), the others skip.
func (s *Sealer) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	var maintained time.Time
	for {
		if time.Since(maintained) > time.Hour {
			if err := s.Maintain(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.WarnContext(ctx, "audit partitions not kept", slog.String("error", err.Error()))
			} else {
				maintained = time.Now()
			}
		}
		if _, err := s.SealOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "audit sealing failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SealOnce seals every tenant's entries older than the horizon (one batch per tenant)
// and writes the checkpoints that are due. It returns how many entries it sealed (0
// when another process holds the sealer's lock).
//
// It reads only the entries above the low-water mark (migration 033): every entry at or
// below it is sealed. The mark moves to the sequence's value noted by an earlier round
// once the horizon has passed every transaction that could have drawn a seq below it,
// and this round sealed all it found.
func (s *Sealer) SealOnce(ctx context.Context) (int, error) {
	sealed := 0
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, sqlSealLock).Scan(&locked); err != nil || !locked {
			return err
		}
		m, err := readMark(ctx, tx)
		if err != nil {
			return err
		}
		// The order matters: the sequence first, then the snapshot (the mark's proof).
		var lastSeq, horizon, xid int64
		if err := tx.QueryRow(ctx, sqlLastSeq).Scan(&lastSeq); err != nil {
			return fmt.Errorf("audit: last seq: %w", err)
		}
		if err := tx.QueryRow(ctx, sqlHorizon).Scan(&horizon, &xid); err != nil {
			return fmt.Errorf("audit: horizon: %w", err)
		}
		rows, err := tx.Query(ctx, sqlTenants, m.low)
		if err != nil {
			return fmt.Errorf("audit: tenants: %w", err)
		}
		tenants, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("audit: tenants: %w", err)
		}
		whole := true // every tenant's unsealed entries below the horizon fit in a batch
		for _, t := range tenants {
			n, err := s.sealTenant(ctx, tx, t, horizon)
			if err != nil {
				return fmt.Errorf("audit: seal tenant %d: %w", t, err)
			}
			sealed += n
			whole = whole && n < s.cfg.Batch
		}
		next := m.next(lastSeq, horizon, xid, whole)
		if next == m {
			return nil
		}
		if _, err := tx.Exec(ctx, sqlSetMark, next.low, next.seq, strconv.FormatInt(next.xmax, 10)); err != nil {
			return fmt.Errorf("audit: low-water mark: %w", err)
		}
		return nil
	})
	return sealed, err
}

// mark is the sealer's low-water mark: every entry with seq <= low is sealed. seq and
// xmax are an earlier round's note (0, 0: none): the sequence's last value, and a
// transaction id assigned after it was read (the sealer's own), above every id assigned
// before.
type mark struct{ low, seq, xmax int64 }

func readMark(ctx context.Context, tx pgx.Tx) (mark, error) {
	var low int64
	var seq, xmax *int64
	err := tx.QueryRow(ctx, sqlMark).Scan(&low, &seq, &xmax)
	if err == pgx.ErrNoRows {
		return mark{}, nil
	}
	if err != nil {
		return mark{}, fmt.Errorf("audit: low-water mark: %w", err)
	}
	m := mark{low: low}
	if seq != nil && xmax != nil {
		m.seq, m.xmax = *seq, *xmax
	}
	return m, nil
}

// next is the mark after a round that read lastSeq, then horizon and its own
// transaction id xid, and sealed every entry below the horizon it found (whole) or not.
// A note whose xmax the horizon has reached proves that each entry up to its seq
// belonged to a transaction that has ended, so the round found it: low moves up to it
// when the round was whole, and the round's own reading becomes the note. A note not
// reached yet is kept (a newer one would be reached later still), and so is one reached
// by a round that left entries for the next.
func (m mark) next(lastSeq, horizon, xid int64, whole bool) mark {
	noted := m.xmax != 0
	reached := noted && horizon >= m.xmax
	if noted && (!reached || !whole) {
		return m
	}
	n := mark{low: m.low, seq: lastSeq, xmax: xid}
	if reached && m.seq > n.low {
		n.low = m.seq
	}
	return n
}

// head is a tenant's last sealed entry.
type head struct {
	tx, seq, entries int64
	hash             []byte
}

func readHead(ctx context.Context, tx pgx.Tx, tenant int64) (head, error) {
	h := head{hash: Genesis}
	var at time.Time
	err := tx.QueryRow(ctx, sqlHead, tenant).Scan(&h.tx, &h.seq, &h.hash, &h.entries, &at)
	if err == pgx.ErrNoRows {
		return head{hash: Genesis}, nil
	}
	return h, err
}

func (s *Sealer) sealTenant(ctx context.Context, tx pgx.Tx, tenant, horizon int64) (int, error) {
	h, err := readHead(ctx, tx, tenant)
	if err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, sqlUnsealed, tenant, strconv.FormatInt(h.tx, 10), h.seq, s.cfg.Batch, strconv.FormatInt(horizon, 10))
	if err != nil {
		return 0, err
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	seqs, prevs, hashes := make([]int64, len(entries)), make([][]byte, len(entries)), make([][]byte, len(entries))
	prev := h.hash
	for i, e := range entries {
		seqs[i], prevs[i] = e.Seq, prev
		prev = Chain(prev, e)
		hashes[i] = prev
	}
	if _, err := tx.Exec(ctx, sqlSeal, tenant, seqs, prevs, hashes); err != nil {
		return 0, err
	}
	last := entries[len(entries)-1]
	h = head{tx: int64(last.Tx), seq: last.Seq, entries: h.entries + int64(len(entries)), hash: prev}
	if _, err := tx.Exec(ctx, sqlSetHead, tenant, strconv.FormatInt(h.tx, 10), h.seq, h.hash, h.entries); err != nil {
		return 0, err
	}
	return len(entries), s.checkpoint(ctx, tx, tenant, h)
}

// checkpoint writes tenant's head as a checkpoint when its last one is older than
// CheckpointEvery, signed when the sealer has a key.
func (s *Sealer) checkpoint(ctx context.Context, tx pgx.Tx, tenant int64, h head) error {
	var last *time.Time
	if err := tx.QueryRow(ctx, sqlLastCheckpoint, tenant).Scan(&last); err != nil {
		return err
	}
	if last != nil && time.Since(*last) < s.cfg.CheckpointEvery {
		return nil
	}
	var pub, sig []byte
	if s.cfg.SigningKey != nil {
		pub = s.cfg.SigningKey.Public().(ed25519.PublicKey)
		sig = ed25519.Sign(s.cfg.SigningKey, CheckpointMessage(tenant, h.entries, h.seq, h.hash))
	}
	_, err := tx.Exec(ctx, sqlCheckpoint, tenant, h.seq, strconv.FormatInt(h.tx, 10), h.entries, h.hash, pub, sig)
	return err
}

// CheckpointMessage is what a checkpoint's signature signs.
func CheckpointMessage(tenant, entries, seq int64, headHash []byte) []byte {
	return fmt.Appendf(nil, "oncebox audit checkpoint v1\ntenant %d\nentries %d\nseq %d\nhead %x\n", tenant, entries, seq, headHash)
}

// Maintain creates the partitions of this month and the next two, and drops the monthly
// partitions whose whole month is older than Retention.
func (s *Sealer) Maintain(ctx context.Context) error {
	if _, err := s.cfg.Pool.Exec(ctx, sqlPartitionsAhead); err != nil {
		return fmt.Errorf("audit: create partitions: %w", err)
	}
	rows, err := s.cfg.Pool.Query(ctx, sqlExpiredPartitions, time.Now().Add(-s.cfg.Retention))
	if err != nil {
		return fmt.Errorf("audit: expired partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("audit: expired partitions: %w", err)
	}
	for _, name := range names {
		if _, err := s.cfg.Pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("audit: drop partition %s: %w", name, err)
		}
		s.cfg.Logger.InfoContext(ctx, "audit partition dropped past retention", slog.String("partition", name))
	}
	return nil
}

func scanEntry(row pgx.CollectableRow) (*Entry, error) {
	var e Entry
	var fields string
	var tx int64
	if err := row.Scan(&e.TenantID, &e.Seq, &tx, &e.At, &e.Kind, &e.OpID, &e.Fingerprint, &fields, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.Tx, e.Fields = uint64(tx), []byte(fields)
	return &e, nil
}
