package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// serveDeadSessionTimeout is serve's --pg-dead-session-timeout by default
// (serveDeadSessionTimeout), which the chaos serve processes keep.
const serveDeadSessionTimeout = 60 * time.Second

// longCutMargin is how long past serveDeadSessionTimeout a cut process's sessions may
// still show in Postgres: the keepalive probes' and the kernel's own slack.
const longCutMargin = 20 * time.Second

// longCutMin is the shortest --long-pg-cut: a cut is long when it outlasts a minute and
// a half of Postgres's patience, as the sessions of issue 42 did.
const longCutMin = 100 * time.Second

// longCut is what the long Postgres cut saw.
type longCut struct {
	// before is how many sessions the process had when its link went down; left how
	// many, and locksLeft how many locks of them, remained at the deadline (-1: not
	// checked).
	before, left, locksLeft int
	// gone is how long after the cut the last of its sessions ended.
	gone time.Duration
	// leftWhat says what each session left at the deadline was doing (state, wait
	// event, the start of its statement), for the run's report.
	leftWhat string
}

// longPGCut cuts the namespaced process's Postgres link for d (more than 100 s), as a
// partition does, and checks what Postgres keeps of the process meanwhile: by
// --pg-dead-session-timeout and a margin after the cut, no session from the process's
// address is left, and so no lock (row, advisory: its liveness lock) of one. A session
// left, or none to begin with, breaks the run.
func (h *harness) longPGCut(ctx context.Context, d time.Duration) error {
	proc := h.procs[0]
	proc.spare()
	defer time.AfterFunc(partitionCalm, proc.unspare)
	if err := h.upAndHealthy(ctx, proc); err != nil {
		h.logger.Warn("long cut: the process is not healthy; cutting it anyway", slog.String("proc", proc.name), slog.Any("error", err))
	}
	addr := h.ns.peerAddr(pathPostgres).String()
	sessions := func(ctx context.Context) (n, locks int, err error) {
		err = h.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE client_addr = $1::inet),
			(SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.client_addr = $1::inet)`, addr).Scan(&n, &locks)
		return n, locks, err
	}
	h.long = &longCut{left: -1, locksLeft: -1}
	var err error
	if h.long.before, _, err = sessions(ctx); err != nil {
		return fmt.Errorf("long cut: count the process's sessions: %w", err)
	}
	h.logger.Info("long cut: Postgres link down", slog.String("proc", proc.name), slog.Duration("for", d), slog.Int("sessions", h.long.before))
	cut := time.Now()
	if err := h.ns.setLink(ctx, pathPostgres, false); err != nil {
		return err
	}
	deadline := cut.Add(serveDeadSessionTimeout + longCutMargin)
	for ctx.Err() == nil {
		n, locks, err := sessions(ctx)
		if err == nil && n == 0 {
			h.long.left, h.long.locksLeft, h.long.gone = 0, 0, time.Since(cut)
			break
		}
		if time.Now().After(deadline) {
			h.long.left, h.long.locksLeft, h.long.leftWhat = n, locks, h.sessionsDoing(ctx, addr)
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(cut.Add(d))):
	}
	if err := h.ns.setLink(context.WithoutCancel(ctx), pathPostgres, true); err != nil {
		return err
	}
	h.partitions[pathPostgres].Add(1)
	h.logger.Info("long cut: Postgres link up", slog.String("proc", proc.name), slog.Int("sessions_left", h.long.left),
		slog.Duration("sessions_gone_after", h.long.gone))
	return nil
}

// longCutBroken says why the long cut broke the run ("": it did not, or there was none).
func (h *harness) longCutBroken() string {
	switch c := h.long; {
	case c == nil:
		return ""
	case c.before == 0:
		return "the long Postgres cut found no session of the process to cut"
	case c.left != 0:
		return fmt.Sprintf("%d sessions of the cut process (holding %d locks) were still in Postgres %s after the cut (--pg-dead-session-timeout %s and a margin): %s",
			c.left, c.locksLeft, serveDeadSessionTimeout+longCutMargin, serveDeadSessionTimeout, c.leftWhat)
	}
	return ""
}

// longCutFigures are the long cut's figures for the line of figures ("" without one).
func (h *harness) longCutFigures() string {
	if h.long == nil {
		return ""
	}
	return fmt.Sprintf(" long_pg_cut=%s long_pg_cut_sessions=%d long_pg_cut_sessions_left=%d long_pg_cut_sessions_gone_after=%s",
		h.cfg.LongPGCut, h.long.before, h.long.left, h.long.gone.Round(time.Second))
}

// sessionsDoing says what the sessions from addr are doing: each one's state, wait
// event and the start of its statement.
func (h *harness) sessionsDoing(ctx context.Context, addr string) string {
	var what string
	err := h.pool.QueryRow(ctx, `SELECT coalesce(string_agg(format('[%s, waiting %s:%s, %s in state, %s]', state,
		coalesce(wait_event_type, '-'), coalesce(wait_event, '-'), date_trunc('second', now() - state_change),
		left(regexp_replace(query, '\s+', ' ', 'g'), 80)), ' '), '')
		FROM pg_stat_activity WHERE client_addr = $1::inet`, addr).Scan(&what)
	if err != nil {
		return "(what they were doing could not be read: " + err.Error() + ")"
	}
	return what
}
