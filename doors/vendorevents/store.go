package vendorevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/protocol"
)

// The outcomes Observer.VendorEvent is told about.
const (
	// OutcomeStored: a new event linked to an op.
	OutcomeStored = "stored"
	// OutcomeOrphan: a new event whose tag names no op; stored and counted.
	OutcomeOrphan = "orphan"
	// OutcomeDuplicate: a redelivery of a stored event; not stored again.
	OutcomeDuplicate = "duplicate"
	// OutcomeUntagged: an event about an object oncebox did not tag; not stored.
	OutcomeUntagged = "untagged"
	// OutcomeIgnored: a tagged event of a type oncebox does not use; not stored.
	OutcomeIgnored = "ignored"
	// OutcomeInvalid: an event of a verified request that cannot be stored (a tag that
	// is not an op id, a NUL or an overlong id, a time out of range); not stored, and
	// the other events of its request are.
	OutcomeInvalid = "invalid"
	// OutcomeRefused: a request whose signature did not verify; nothing stored.
	OutcomeRefused = "refused"
)

// Observer is told about every event received, for metrics. It must be quick and safe
// for concurrent use.
type Observer interface {
	// VendorEvent is called once per event (once per refused request) with one of the
	// Outcome constants.
	VendorEvent(vendor, outcome string)
}

type nopObserver struct{}

func (nopObserver) VendorEvent(string, string) {}

// Config configures a Store.
type Config struct {
	// Pool is the oncebox database. Required.
	Pool *pgxpool.Pool
	// Retention is how long events are kept after they arrived
	// (ONCEBOX_VENDOR_EVENT_RETENTION). Defaults to 30 days.
	Retention time.Duration
	// PurgeInterval is how often the purge job runs. Defaults to 1 hour.
	PurgeInterval time.Duration
	// PurgeBatch is how many events one purge statement deletes at most. Defaults to
	// 1,000.
	PurgeBatch int
	// Observer receives one outcome per event. Defaults to one that does nothing.
	Observer Observer
	// Logger receives structured logs. Defaults to discarding them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Retention == 0 {
		c.Retention = 30 * 24 * time.Hour
	}
	if c.PurgeInterval == 0 {
		c.PurgeInterval = time.Hour
	}
	if c.PurgeBatch == 0 {
		c.PurgeBatch = 1000
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("vendorevents: Config.Pool is required")
	case c.Retention < time.Hour:
		return fmt.Errorf("vendorevents: Retention %s is too short; keep events at least 1h (longer than the vendors' redelivery, 3 days for Stripe, is better)", c.Retention)
	case c.PurgeInterval < time.Second:
		return fmt.Errorf("vendorevents: PurgeInterval %s is too short; use 1s or more", c.PurgeInterval)
	case c.PurgeBatch < 1:
		return errors.New("vendorevents: PurgeBatch must be at least 1")
	}
	return nil
}

// Store keeps vendor events in Postgres. It is safe for concurrent use.
type Store struct {
	cfg Config
}

// New returns a Store.
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg}, nil
}

// Recorded says what one Record call stored.
type Recorded struct {
	// Stored counts new events (orphans included); Duplicates the events stored before.
	Stored, Duplicates, Orphans int
	// OpIDs are the ops that new, linked events name, without repeats.
	OpIDs []string
}

// Record stores events in one transaction, each at most once per (vendor, event id):
// a redelivered event is counted as a duplicate and not stored again. The Observer is
// told about each event once the transaction committed.
func (s *Store) Record(ctx context.Context, events []Event) (Recorded, error) {
	var rec Recorded
	if len(events) == 0 {
		return rec, nil
	}
	outcomes := make([]string, len(events))
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		rec = Recorded{}
		b := &pgx.Batch{}
		for i := range events {
			// A tag is stored as the op id it names, so that the op's reads find it.
			events[i].OpTag = NormalizeTag(events[i].OpTag)
			e := events[i]
			var opUUID any
			if protocol.IsOpID(e.OpTag) {
				opUUID = e.OpTag
			}
			b.Queue(sqlInsertEvent, e.Vendor, e.EventID, e.Type, e.OpTag, e.ObjectType, e.ObjectID, e.Status,
				e.Amount, e.Currency, nullTime(e.ObjectCreated), e.OccurredAt, nullJSON(e.Summary), opUUID, e.Account)
		}
		br := tx.SendBatch(ctx, b)
		seen := map[string]bool{}
		for i, e := range events {
			var orphan bool
			err := br.QueryRow().Scan(&orphan)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				rec.Duplicates++
				outcomes[i] = OutcomeDuplicate
			case err != nil:
				_ = br.Close()
				return fmt.Errorf("store %s event %s: %w", e.Vendor, e.EventID, err)
			case orphan:
				rec.Stored++
				rec.Orphans++
				outcomes[i] = OutcomeOrphan
			default:
				rec.Stored++
				outcomes[i] = OutcomeStored
				if !seen[e.OpTag] {
					seen[e.OpTag] = true
					rec.OpIDs = append(rec.OpIDs, e.OpTag)
				}
			}
		}
		return br.Close()
	})
	if err != nil {
		return Recorded{}, fmt.Errorf("vendorevents: record: %w", err)
	}
	for i, e := range events {
		s.cfg.Observer.VendorEvent(e.Vendor, outcomes[i])
	}
	return rec, nil
}

// NormalizeTag is an event's oncebox_op tag as stored: trimmed and in lower case, as
// op ids are written.
func NormalizeTag(tag string) string { return strings.ToLower(strings.TrimSpace(tag)) }

// ForOp returns the vendor's events tagged with opID that came the way the op was sent
// (sameAccount) and name the object it made once its vendor_ref is known, oldest
// first; before then, they are marked Unconfirmed.
func (s *Store) ForOp(ctx context.Context, vendor, opID string) ([]Event, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlEventsForOp, opID, vendor)
	if err != nil {
		return nil, fmt.Errorf("vendorevents: events of op %s: %w", opID, err)
	}
	evs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("vendorevents: events of op %s: %w", opID, err)
	}
	return evs, nil
}

// forOps returns the events tagged with any of opIDs, by op id.
func (s *Store) forOps(ctx context.Context, opIDs []string) (map[string][]Event, error) {
	rows, err := s.cfg.Pool.Query(ctx, sqlEventsForOps, opIDs)
	if err != nil {
		return nil, fmt.Errorf("vendorevents: events of ops: %w", err)
	}
	evs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("vendorevents: events of ops: %w", err)
	}
	out := map[string][]Event{}
	for _, e := range evs {
		out[e.OpTag] = append(out[e.OpTag], e)
	}
	return out, nil
}

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var (
		e       Event
		created *time.Time
	)
	err := row.Scan(&e.Vendor, &e.EventID, &e.Type, &e.OpTag, &e.ObjectType, &e.ObjectID, &e.Status, &e.Amount,
		&e.Currency, &created, &e.OccurredAt, &e.Summary, &e.ReceivedAt, &e.Orphan, &e.Account, &e.Unconfirmed)
	if created != nil {
		e.ObjectCreated = *created
	}
	return e, err
}

// Purge deletes the events received more than Config.Retention ago, in batches, and
// returns how many it deleted.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	cutoff := time.Now().Add(-s.cfg.Retention)
	var total int64
	for {
		tag, err := s.cfg.Pool.Exec(ctx, sqlPurge, cutoff, s.cfg.PurgeBatch)
		if err != nil {
			return total, fmt.Errorf("vendorevents: purge: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.cfg.PurgeBatch) {
			return total, nil
		}
	}
}

// PurgeArgs is the River job that runs Purge.
type PurgeArgs struct{}

// Kind implements river.JobArgs.
func (PurgeArgs) Kind() string { return "oncebox.vendor_event_purge" }

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	s *Store
}

// Work runs one purge.
func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	n, err := w.s.Purge(ctx)
	if n > 0 {
		w.s.cfg.Logger.Info("vendor events purged", slog.Int64("deleted", n), slog.Duration("retention", w.s.cfg.Retention))
	}
	return err
}

// Register adds the purge worker to workers.
func (s *Store) Register(workers *river.Workers) error {
	if err := river.AddWorkerSafely(workers, &purgeWorker{s: s}); err != nil {
		return fmt.Errorf("vendorevents: register purge worker: %w", err)
	}
	return nil
}

// PeriodicJob is the purge every Config.PurgeInterval on queue (the maintenance queue
// the reconciler uses), unique per interval across processes.
func (s *Store) PeriodicJob(queue string) *river.PeriodicJob {
	interval := s.cfg.PurgeInterval
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) {
			return PurgeArgs{}, &river.InsertOpts{Queue: queue, UniqueOpts: river.UniqueOpts{ByPeriod: interval}}
		},
		&river.PeriodicJobOpts{RunOnStart: true})
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
