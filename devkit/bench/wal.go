package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WALShare is the WAL that one relation (a table or an index), or the records that name
// none (commits, MultiXacts), took between two positions.
type WALShare struct {
	// Relation is the relation's name, or "-" for records without one.
	Relation string
	// Kind is the resource manager and record type, as pg_walinspect names them
	// ("Heap/UPDATE", "Btree/INSERT_LEAF").
	Kind string
	// Records is how many WAL records; Bytes their length, full-page images included.
	Records, Bytes int64
}

// WALMark is a position in the WAL from which WALSince reads.
type WALMark string

// MarkWAL returns the cluster's WAL position as flushed now. It fails when the
// pg_walinspect extension (PostgreSQL 15 and later, a superuser to create it) is
// unavailable, before any work is measured.
func MarkWAL(ctx context.Context, pool *pgxpool.Pool) (WALMark, error) {
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public"); err != nil {
		return "", fmt.Errorf("bench: pg_walinspect: %w", err)
	}
	return flushedWAL(ctx, pool)
}

// flushedWAL is the cluster's WAL position as flushed now.
func flushedWAL(ctx context.Context, pool *pgxpool.Pool) (WALMark, error) {
	var lsn string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&lsn); err != nil {
		return "", fmt.Errorf("bench: read the WAL position: %w", err)
	}
	return WALMark(lsn), nil
}

// sqlWALByRelation sums the WAL records between two positions by the relation their
// first block names (matched to this database's relations by file node) and by kind.
const sqlWALByRelation = `
SELECT coalesce(c.relname, r.node, '-'), r.resource_manager || '/' || r.record_type, count(*), sum(r.record_length)
FROM (SELECT resource_manager, record_type, record_length, substring(block_ref FROM 'rel \d+/\d+/(\d+)') AS node
	FROM public.pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)) r
LEFT JOIN pg_class c ON c.relfilenode::text = r.node
GROUP BY 1, 2`

// WALSince returns the WAL written since from, by relation and record kind, largest
// first. Every committed transaction's records are in it; the whole cluster's are, so
// it means something only on a cluster nothing else writes to.
func WALSince(ctx context.Context, pool *pgxpool.Pool, from WALMark) ([]WALShare, error) {
	to, err := flushedWAL(ctx, pool)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, sqlWALByRelation, string(from), string(to))
	if err != nil {
		return nil, fmt.Errorf("bench: read the WAL: %w", err)
	}
	defer rows.Close()
	var shares []WALShare
	for rows.Next() {
		var s WALShare
		if err := rows.Scan(&s.Relation, &s.Kind, &s.Records, &s.Bytes); err != nil {
			return nil, fmt.Errorf("bench: read the WAL: %w", err)
		}
		shares = append(shares, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("bench: read the WAL: %w", err)
	}
	sort.Slice(shares, func(i, j int) bool { return shares[i].Bytes > shares[j].Bytes })
	return shares, nil
}

// WALGroup names the part of an op's life a relation belongs to: "river" for River's job
// table and its indexes, "op" for oncebox_op and its indexes, "attempt" for
// oncebox_attempt and its indexes, "other" for the rest (commits, MultiXacts, the op's
// events, other tables).
func WALGroup(relation string) string {
	switch {
	case strings.HasPrefix(relation, "oncebox_op_event"):
		return "other"
	case strings.HasPrefix(relation, "river_job"):
		return "river"
	case strings.HasPrefix(relation, "oncebox_attempt"):
		return "attempt"
	case relation == "oncebox_op" || strings.HasPrefix(relation, "oncebox_op_"):
		return "op"
	}
	return "other"
}
