package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/devkit/localpg"
)

// Failover modes (Config.Failover).
const (
	failoverSync  = "sync"
	failoverAsync = "async"
)

// replLag is how long the primary's WAL sender is stopped (SIGSTOP) before the primary
// is killed, the sender with it: a standby that far behind, as a slow or congested link
// leaves it. A synchronous primary's commits wait for the standby meanwhile, and none
// is reported; an asynchronous one's go on, and whatever they wrote is lost with the
// primary. (Stopping the standby's WAL receiver instead loses nothing on one machine:
// what the sender wrote waits in the receiver's socket buffer.)
const replLag = 2 * time.Second

// detectAfter is how long after the primary's death the standby is promoted: an
// operator's or a failover manager's reaction time, cut short, and past the 4 s for which
// a process may still call a vendor on its last lock confirmation from the old primary
// (outbox's livenessConfirmed): a run fetched on the new primary then needs a lock held
// there, which the takeover rule sees (docs/operations.md, Deployment: failover).
const detectAfter = 5 * time.Second

// failover is the state of a failover run (Config.Failover).
type failover struct {
	// standby is the streaming standby, promoted by failover; old is the dead primary
	// started again after the run, on a port of its own, to count what it had and the
	// standby did not.
	standby, old *localpg.Postgres
	standbyCfg   localpg.Config
	// atFork is the standby's data at promotion: what the new primary starts from;
	// atDeath the old primary's when it died.
	atFork, atDeath *dbState
	// promotedIn is how long the database took writes from nobody: the primary's
	// death to the standby's promotion.
	promotedIn time.Duration
	done       bool
}

// startStandby starts a streaming standby of the private primary, makes the primary
// wait for it with Config.Failover "sync", and points the run at both through a
// multi-host URL with target_session_attrs=read-write: every client reaches whichever
// one takes writes.
func (h *harness) startStandby(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	h.fo.standbyCfg = h.pgCfg
	h.fo.standbyCfg.DataDir = filepath.Join(h.tmp, "pgdata-standby")
	h.fo.standbyCfg.Port = port
	h.fo.standbyCfg.StandbyOf = h.pg.URL
	h.fo.standbyCfg.Logger = h.logger.With(slog.String("component", "localpg-standby"))
	if h.fo.standby, err = localpg.Start(ctx, h.fo.standbyCfg); err != nil {
		return fmt.Errorf("start the standby: %w", err)
	}
	conn, err := pgx.Connect(ctx, h.pg.URL)
	if err != nil {
		return fmt.Errorf("connect to the primary: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	names := "" // asynchronous: the primary waits for nobody
	if h.cfg.Failover == failoverSync {
		names = "*"
	}
	// ALTER SYSTEM after the base backup: the standby, once promoted, waits for nobody.
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '" + names + "'", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("primary: %s: %w", q, err)
		}
	}
	want := map[string]string{failoverSync: "sync", failoverAsync: "async"}[h.cfg.Failover]
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		if err := conn.QueryRow(ctx, "SELECT coalesce(max(sync_state), '') FROM pg_stat_replication").Scan(&state); err != nil {
			return fmt.Errorf("primary: read pg_stat_replication: %w", err)
		}
		if state == want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby does not stream as %s within 30 s (pg_stat_replication says %q)", want, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h.dbURL, err = multiHostURL(h.pg.URL, h.fo.standby.URL); err != nil {
		return err
	}
	h.logger.Info("standby streaming", slog.String("replication", want), slog.String("data_dir", h.fo.standby.DataDir))
	return nil
}

// multiHostURL is primary's URL naming standby's host too, and
// target_session_attrs=read-write: pgx tries the hosts in order and keeps the first
// that takes writes.
func multiHostURL(primary, standby string) (string, error) {
	p, err := url.Parse(primary)
	if err != nil {
		return "", err
	}
	s, err := url.Parse(standby)
	if err != nil {
		return "", err
	}
	if p.User.String() != s.User.String() || p.Path != s.Path {
		return "", errors.New("the standby's user or database differs from the primary's")
	}
	q := p.Query()
	q.Set("target_session_attrs", "read-write")
	p.Host = p.Host + "," + s.Host
	p.RawQuery = q.Encode()
	return p.String(), nil
}

// failOver is the failover in the middle of the chaos: the standby held back by
// replLag, the primary SIGKILLed, the standby's data read at the fork, the standby
// promoted detectAfter after the death. The primary is never started again while the
// run lasts: it is fenced, as a failover must leave it.
func (h *harness) failOver(ctx context.Context) error {
	h.pgMu.Lock()
	defer h.pgMu.Unlock()
	var sender int
	if err := queryOn(ctx, h.pg.URL, "SELECT coalesce(max(pid), 0) FROM pg_stat_replication", &sender); err != nil {
		return fmt.Errorf("primary: find the WAL sender: %w", err)
	}
	if sender == 0 {
		return errors.New("primary: no WAL sender runs")
	}
	h.logger.Info("holding the standby back (SIGSTOP of the primary's WAL sender)", slog.Int("pid", sender), slog.Duration("for", replLag))
	if err := syscall.Kill(sender, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop the WAL sender: %w", err)
	}
	time.Sleep(replLag)
	h.logger.Info("crashing the primary (SIGKILL of the WAL sender and the postmaster) for a failover", slog.String("replication", h.cfg.Failover))
	t0 := time.Now()
	_ = syscall.Kill(sender, syscall.SIGKILL)
	if err := h.pg.Crash(ctx); err != nil {
		return fmt.Errorf("crash the primary: %w", err)
	}
	h.pgCrashes.Add(1)
	// The standby replays what it received before anything reads it.
	for range 100 {
		var caughtUp bool
		if err := queryOn(ctx, h.fo.standby.URL, "SELECT pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn()", &caughtUp); err == nil && caughtUp {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var err error
	if h.fo.atFork, err = h.readState(ctx, h.fo.standby.URL); err != nil {
		return fmt.Errorf("standby: read its data at the fork: %w", err)
	}
	time.Sleep(max(0, detectAfter-time.Since(t0)))
	if err := h.fo.standby.Promote(ctx); err != nil {
		return err
	}
	h.fo.promotedIn = time.Since(t0)
	h.fo.done = true
	h.logger.Info("standby promoted: the new primary", slog.Duration("writes_refused_for", h.fo.promotedIn))
	return nil
}

// dbState is what the check compares of one server: the tenant's ops, the events and
// attempts of each, and each dispatch job's attempt and state.
type dbState struct {
	ops      map[string]string // op id -> idempotency key
	events   map[string]int    // op id -> events
	attempts map[string]int    // op id -> oncebox_attempt rows
	jobs     map[int64]jobState
}

type jobState struct {
	opID    string
	attempt int
	state   string
}

const (
	qStateOps      = `SELECT id::text, idempotency_key FROM oncebox_op WHERE tenant_id = ANY($1)`
	qStateEvents   = `SELECT e.op_id::text, count(*) FROM oncebox_op_event e JOIN oncebox_op o ON o.id = e.op_id WHERE o.tenant_id = ANY($1) GROUP BY 1`
	qStateAttempts = `SELECT a.op_id::text, count(*) FROM oncebox_attempt a JOIN oncebox_op o ON o.id = a.op_id WHERE o.tenant_id = ANY($1) GROUP BY 1`
	qStateJobs     = `SELECT id, coalesce(args->>'op_id', ''), attempt, state::text FROM river_job WHERE kind = 'oncebox.dispatch'`
)

// readState reads a dbState from the server at databaseURL.
func (h *harness) readState(ctx context.Context, databaseURL string) (*dbState, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st := &dbState{ops: map[string]string{}, events: map[string]int{}, attempts: map[string]int{}, jobs: map[int64]jobState{}}
	rows, _ := conn.Query(ctx, qStateOps, h.tenantIDs())
	var id, key string
	if _, err := pgx.ForEachRow(rows, []any{&id, &key}, func() error { st.ops[id] = key; return nil }); err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	var n int
	for q, into := range map[string]map[string]int{qStateEvents: st.events, qStateAttempts: st.attempts} {
		rows, _ := conn.Query(ctx, q, h.tenantIDs())
		if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { into[id] = n; return nil }); err != nil {
			return nil, err
		}
	}
	var j jobState
	var jobID int64
	rows, _ = conn.Query(ctx, qStateJobs)
	if _, err := pgx.ForEachRow(rows, []any{&jobID, &j.opID, &j.attempt, &j.state}, func() error { st.jobs[jobID] = j; return nil }); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	return st, nil
}

func queryOn(ctx context.Context, databaseURL, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// forkLoss is what the old primary had committed that the promoted standby never got.
// With a synchronous standby these are commits that were waiting for the standby when
// the primary died, written to the primary's WAL but never reported to their client;
// with an asynchronous one, reported commits too.
type forkLoss struct {
	// acked counts the lost op rows an API answer had named (a 2xx with the op's id):
	// commits reported, then lost. Zero is the synchronous standby's promise.
	acked int
	// ops are the op rows lost (keys the API had answered for), events the op events
	// (state changes), attempts the oncebox_attempt rows (claims), fetches the River
	// fetches (a job attempt begun) and completions the jobs completed (or deleted by the
	// record that settled their op), all lost.
	ops, events, attempts, fetches, completions int
	// touched are the ops, by id, and their keys, any of whose commits was lost.
	touched     map[string]bool
	touchedKeys map[string]bool
}

func (l forkLoss) total() int { return l.ops + l.events + l.attempts + l.fetches + l.completions }

// diffFork compares the old primary's data with the standby's at the fork.
func diffFork(old, fork *dbState) forkLoss {
	l := forkLoss{touched: map[string]bool{}, touchedKeys: map[string]bool{}}
	touch := func(opID string) {
		l.touched[opID] = true
		if key, ok := old.ops[opID]; ok {
			l.touchedKeys[key] = true
		}
	}
	for id := range old.ops {
		if _, ok := fork.ops[id]; !ok {
			l.ops++
			touch(id)
		}
	}
	for id, n := range old.events {
		if d := n - fork.events[id]; d > 0 {
			l.events += d
			touch(id)
		}
	}
	for id, n := range old.attempts {
		if d := n - fork.attempts[id]; d > 0 {
			l.attempts += d
			touch(id)
		}
	}
	for id, j := range old.jobs {
		f, ok := fork.jobs[id]
		switch {
		case !ok:
			touch(j.opID) // the op's row went with it
		case j.attempt > f.attempt:
			l.fetches += j.attempt - f.attempt
			touch(j.opID)
		case j.state == "completed" && f.state != "completed":
			l.completions++
			touch(j.opID)
		}
	}
	for id, f := range fork.jobs {
		if _, ok := old.jobs[id]; !ok && f.state != "completed" {
			// A record that settled its op deleted the job's row (a clean run with
			// batched completion): the fork lost that deletion, a completion.
			l.completions++
			touch(f.opID)
		}
	}
	return l
}

// measureFork starts the dead primary again on a port of its own (crash recovery, no
// client can reach it) after the run, and counts what it had that the fork did not.
func (h *harness) measureFork(ctx context.Context) (forkLoss, error) {
	port, err := freePort()
	if err != nil {
		return forkLoss{}, err
	}
	cfg := h.pgCfg
	cfg.Port = port
	if h.fo.old, err = localpg.Start(ctx, cfg); err != nil {
		return forkLoss{}, fmt.Errorf("start the old primary again, alone: %w", err)
	}
	if h.fo.atDeath, err = h.readState(ctx, h.fo.old.URL); err != nil {
		return forkLoss{}, fmt.Errorf("old primary: %w", err)
	}
	return diffFork(h.fo.atDeath, h.fo.atFork), nil
}

// failoverCheck measures the fork after a failover run and returns the report and the
// non-linearizable keys the verdict is taken on, and whether the failover kept its own
// promise; without Config.Failover, rep and illegal as they are.
func (h *harness) failoverCheck(ctx context.Context, in CheckInput, rep Report, illegal []string) (Report, []string, bool, error) {
	if h.cfg.Failover == "" {
		return rep, illegal, true, nil
	}
	var loss forkLoss
	if h.fo.done {
		var err error
		if loss, err = h.measureFork(ctx); err != nil {
			return rep, illegal, false, err
		}
		answered := map[string]bool{}
		for _, c := range h.history.Calls() {
			if c.Answer.Code >= 200 && c.Answer.Code < 300 && c.Answer.OpID != "" {
				answered[c.Answer.OpID] = true
			}
		}
		for id := range h.fo.atDeath.ops {
			if _, kept := h.fo.atFork.ops[id]; !kept && answered[id] {
				loss.acked++
			}
		}
	}
	explained, ok := h.failoverVerdict(loss, rep, illegal)
	h.printDoubled(in)
	keep := func(fs []Finding) []Finding {
		var out []Finding
		for _, f := range fs {
			if explained[f.String()] {
				fmt.Fprintln(h.cfg.Out, "FAILOVER_LOSS:", f.String())
				continue
			}
			out = append(out, f)
		}
		return out
	}
	v := rep
	v.Duplicates, v.Lost, v.Mismatched, v.Orphans = keep(rep.Duplicates), keep(rep.Lost), keep(rep.Mismatched), keep(rep.Orphans)
	v.ConflictLeaks, v.Unplanned, v.Double202 = keep(rep.ConflictLeaks), keep(rep.Unplanned), keep(rep.Double202)
	v.Composite = keep(rep.Composite)
	var left []string
	for _, k := range illegal {
		if !explained["history:"+k] {
			left = append(left, k)
		}
	}
	return v, left, ok, nil
}

// failoverVerdict prints the failover's line and returns the findings the loss at the
// fork explains. With a synchronous standby no commit reported to a client may be lost
// (what the old primary alone holds was waiting for the standby, never answered), so
// nothing is explained: the verdict stays make chaos's, and no lost op row may have
// been named in an API answer. With an asynchronous one, findings about
// ops whose own commits were lost (and orphans tagged with an op only the old primary
// had) are the design-known cost of the setting: counted and printed, not failed; any
// other finding fails the run as always.
func (h *harness) failoverVerdict(loss forkLoss, rep Report, illegal []string) (explained map[string]bool, ok bool) {
	explained = map[string]bool{}
	if h.cfg.Failover == failoverAsync {
		for _, fs := range [][]Finding{rep.Duplicates, rep.Lost, rep.Mismatched, rep.Orphans, rep.ConflictLeaks, rep.Unplanned, rep.Double202, rep.Composite} {
			for _, f := range fs {
				if loss.touched[f.OpID] || loss.touchedKeys[f.Key] {
					explained[f.String()] = true
				}
			}
		}
		for _, k := range illegal {
			if loss.touchedKeys[k] {
				explained["history:"+k] = true
			}
		}
	}
	byKind := map[string]int{}
	for _, fs := range []struct {
		name string
		fs   []Finding
	}{{"duplicates", rep.Duplicates}, {"lost", rep.Lost}, {"mismatched", rep.Mismatched}, {"orphans", rep.Orphans},
		{"conflict_leaks", rep.ConflictLeaks}, {"unplanned", rep.Unplanned}, {"double_202", rep.Double202}, {"composite", rep.Composite}} {
		for _, f := range fs.fs {
			if explained[f.String()] {
				byKind[fs.name]++
			}
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k, n := range byKind {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	ok = h.fo.done && (h.cfg.Failover == failoverAsync || loss.acked == 0)
	fmt.Fprintf(h.cfg.Out, "failover=%s standby_lag_at_crash=%s writes_refused_for=%s old_primary_only: ops=%d (answered=%d) events=%d attempts=%d fetches=%d completions=%d ops_touched=%d explained_by_fork=[%s] non_linearizable_explained=%d failover_ok=%t\n",
		h.cfg.Failover, replLag, h.fo.promotedIn.Round(10*time.Millisecond), loss.ops, loss.acked, loss.events, loss.attempts, loss.fetches, loss.completions,
		len(loss.touched), strings.Join(kinds, " "), len(explained)-sum(byKind), ok)
	return explained, ok
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// printDoubled prints, by vendor, the idempotency keys that hold more than one side
// effect across all their ops: an op whose row was lost with the old primary is
// created again when its key is sent again, under a new op id, and a vendor without
// an idempotency key of its own acts twice. The check's duplicates count per op id and
// miss these; here the old primary's ops name the keys of the lost ones.
func (h *harness) printDoubled(in CheckInput) {
	keyOf := map[string]string{}
	if h.fo.atDeath != nil {
		for id, key := range h.fo.atDeath.ops {
			keyOf[id] = key
		}
	}
	for _, op := range in.Ops {
		keyOf[op.ID] = op.Key
	}
	byKey := map[string][]VendorObject{}
	for _, obj := range in.Objects {
		if key, ok := keyOf[obj.OpID]; ok && obj.Effect {
			byKey[key] = append(byKey[key], obj)
		}
	}
	kinds := map[string]int{}
	for key, objs := range byKey {
		if len(objs) > 1 {
			kinds[objs[0].Kind]++
			fmt.Fprintf(h.cfg.Out, "DOUBLED_KEY: key=%s %s\n", key, describe(objs))
		}
	}
	names := make([]string, 0, len(kinds))
	for k, n := range kinds {
		names = append(names, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(names)
	fmt.Fprintf(h.cfg.Out, "failover=%s keys_with_two_effects: [%s]\n", h.cfg.Failover, strings.Join(names, " "))
}

// closeFailover stops the standby and the old primary.
func (h *harness) closeFailover(ctx context.Context) {
	for _, pg := range []*localpg.Postgres{h.fo.standby, h.fo.old} {
		if pg != nil {
			if err := pg.Close(ctx); err != nil {
				h.logger.Warn("stop Postgres", slog.Any("error", err))
			}
		}
	}
}
