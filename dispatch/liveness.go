package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// LiveClientPrefix starts the River client id of every process that holds a liveness
// lock: another process can prove such a process gone, and take its jobs over at once.
const LiveClientPrefix = "oncebox_live_"

// Liveness timings. A process pings its lock connection every livenessInterval and
// calls no vendor unless a ping sent less than livenessConfirmed ago was answered;
// livenessMargin (queries.go) must exceed livenessConfirmed.
const (
	livenessInterval  = time.Second
	livenessConfirmed = 4 * time.Second
	livenessPingLimit = 2 * time.Second
	// livenessStartWait bounds how long Start waits for the lock before the workers
	// fetch jobs anyway (each then waits for the lock, see the worker's Work).
	livenessStartWait = 5 * time.Second
)

// NewClientID returns a River client id that starts with LiveClientPrefix: the host,
// the process id and random bytes, so that no two processes share one.
func NewClientID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, host)
	if len(host) > 40 {
		host = host[:40]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%s_%d_%s", LiveClientPrefix, host, os.Getpid(), hex.EncodeToString(b[:]))
}

// liveness holds the process's liveness lock and takes over the jobs of gone
// processes: Postgres releases the lock when the process or its lock connection dies,
// so a free lock proves the process gone (processGoneSQL says when exactly). A process
// that is alive but silent (paused, cut off) keeps its lock, and its jobs wait for their
// job timeout as before.
type liveness struct {
	d  *Dispatcher
	id string
	// base is the monotonic origin of confirmed.
	base time.Time
	// confirmed is when (since base) the last answered ping was sent; 0: never.
	confirmed atomic.Int64
	// held is closed when the lock is first held.
	held     chan struct{}
	heldOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

func newLiveness(d *Dispatcher, id string) *liveness {
	return &liveness{d: d, id: id, base: time.Now(), held: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
}

// waitHeld waits until the lock is first held, for at most d or until ctx is done.
func (l *liveness) waitHeld(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.held:
	case <-t.C:
	case <-ctx.Done():
	}
}

// ok says whether the process may call a vendor: its lock was confirmed held by a ping
// sent less than livenessConfirmed ago.
func (l *liveness) ok() bool {
	c := l.confirmed.Load()
	return c > 0 && time.Duration(int64(time.Since(l.base))-c) < livenessConfirmed
}

// start runs the lock and takeover loop until close.
func (l *liveness) start() { go l.run() }

// close ends the loop and the lock connection, which releases the lock.
func (l *liveness) close() {
	close(l.stop)
	<-l.done
}

func (l *liveness) run() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	log := l.d.deps.Logger.With(slog.String("client_id", l.id))
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	for {
		if conn == nil {
			var err error
			if conn, err = l.lock(ctx); err != nil && ctx.Err() == nil {
				log.Warn("liveness: could not take the process's lock; dispatch waits until it is held", slog.String("error", err.Error()))
			}
		} else if !l.ping(ctx, conn) && ctx.Err() == nil {
			log.Warn("liveness: the lock connection was lost; dispatch waits until the lock is held again")
			_ = conn.Close(context.Background())
			conn = nil
			continue
		}
		if l.ok() {
			// Only a process whose own lock is held takes over: its view of the
			// others' locks is then current.
			l.takeOver(ctx, log)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lock opens the lock connection and takes the lock on it. The connection keeps its
// session through idle periods (idle_session_timeout off) and through short network
// outages (TCP keepalives after 5 minutes of silence, rather than the system's 2 hours,
// unless the pool's connections set their own: serve's --pg-dead-session-timeout), so
// that a live process does not lose its lock, and a cut one loses it in minutes.
func (l *liveness) lock(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.d.deps.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = l.id
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sent := time.Since(l.base)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	sets := []string{"SET idle_session_timeout = 0"}
	if _, own := cfg.RuntimeParams["tcp_keepalives_idle"]; !own {
		sets = append(sets, "SET tcp_keepalives_idle = 300")
	}
	for _, set := range sets {
		_, _ = conn.Exec(cctx, set) // older servers lack the first; the lock works without them
	}
	var held bool
	if err := conn.QueryRow(cctx, sqlLivenessLock, l.id).Scan(&held); err != nil || !held {
		_ = conn.Close(context.Background())
		if err == nil {
			// A session of this process may linger on the server after a network
			// outage; it ends, and its lock with it, when the server notices.
			err = fmt.Errorf("another session holds the lock of %s", l.id)
		}
		return nil, err
	}
	l.confirmed.Store(int64(sent))
	l.heldOnce.Do(func() { close(l.held) })
	l.d.deps.Logger.Info("liveness: lock held", slog.String("client_id", l.id))
	return conn, nil
}

// ping confirms the lock: the session that holds it answered.
func (l *liveness) ping(ctx context.Context, conn *pgx.Conn) bool {
	pctx, cancel := context.WithTimeout(ctx, livenessPingLimit)
	defer cancel()
	sent := time.Since(l.base)
	if _, err := conn.Exec(pctx, "SELECT 1"); err != nil {
		return false
	}
	l.confirmed.Store(int64(sent))
	return true
}

// takeOver makes the running dispatch and step runner jobs of gone processes available
// (sqlTakeOver).
func (l *liveness) takeOver(ctx context.Context, log *slog.Logger) {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := l.d.deps.Pool.Query(tctx, sqlTakeOver, l.id)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("liveness: takeover query failed", slog.String("error", err.Error()))
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			jobID    int64
			opID     string
			fromProc string
		)
		if err := rows.Scan(&jobID, &opID, &fromProc); err != nil {
			log.Warn("liveness: takeover row", slog.String("error", err.Error()))
			return
		}
		log.Info("liveness: took over the dispatch job of a gone process", slog.Int64("job_id", jobID),
			slog.String("op_id", opID), slog.String("from_client_id", fromProc))
	}
	if err := rows.Err(); err != nil && ctx.Err() == nil {
		log.Warn("liveness: takeover query failed", slog.String("error", err.Error()))
	}
}
