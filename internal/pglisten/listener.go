// Package pglisten listens on Postgres notification channels over one dedicated
// connection, outside any pool, and hands each notification to the handler of its
// channel: a process holds one listening connection however many channels it follows
// (the long polls' settled ops, the token cache's token changes).
//
// A notification is delivered only to a session that listened when it was sent, so a
// handler is told when listening starts and when it stops: what it remembers from
// before, or from a time nobody listened, may be stale. A connection that stalls (a cut
// network, a proxy that stops forwarding) delivers no notification and no error, so the
// listener sends a heartbeat round trip on it (SetHeartbeat): one that does not come
// back in time counts the connection as lost.
package pglisten

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Handler receives the notifications of one channel.
type Handler interface {
	// Listening is called with true once the connection listens on every channel (a
	// notification sent before may have been missed), and with false when it is lost
	// (until it listens again, notifications are missed).
	Listening(on bool)
	// Notified is called with the payload of each notification on the channel, in the
	// order Postgres delivers them, one at a time.
	Notified(payload string)
}

// DefaultHeartbeat is the heartbeat New sets (SetHeartbeat).
const DefaultHeartbeat = time.Second

// Listener listens on the channels of its handlers.
type Listener struct {
	connConfig *pgx.ConnConfig
	logger     *slog.Logger
	channels   []channel
	heartbeat  time.Duration
}

type channel struct {
	name string
	h    Handler
	// whileLost says what the handler's users do while nobody listens, for the log.
	whileLost string
}

// New returns a Listener that listens over a connection of its own made from
// connConfig. A nil logger discards.
func New(connConfig *pgx.ConnConfig, logger *slog.Logger) *Listener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{connConfig: connConfig, logger: logger, heartbeat: DefaultHeartbeat}
}

// SetHeartbeat makes the listener send a round trip (SELECT 1) on its connection every
// d, which must come back within d: otherwise the connection counts as lost (the
// handlers are told, and it is made again), as a stalled connection delivers no
// notification and no error. Its handlers thus learn of a stall within about 2d. 0
// turns heartbeats off. Call it before Run; New sets DefaultHeartbeat.
func (l *Listener) SetHeartbeat(d time.Duration) { l.heartbeat = max(d, 0) }

// Handle makes h the handler of the channel named name; whileLost says, for the log
// line of a lost connection, what h's users do until it is back ("long polls poll").
// Call it before Run.
func (l *Listener) Handle(name string, h Handler, whileLost string) {
	l.channels = append(l.channels, channel{name: name, h: h, whileLost: whileLost})
}

// Run listens until ctx is done, reconnecting after a lost connection with a backoff
// from 100 milliseconds up to 5 seconds. It returns at once without handlers.
func (l *Listener) Run(ctx context.Context) {
	if len(l.channels) == 0 {
		return
	}
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		listened, err := l.listen(ctx)
		l.tell(false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			delay = 100 * time.Millisecond
		}
		var lost []string
		for _, c := range l.channels {
			lost = append(lost, c.whileLost)
		}
		l.logger.Warn("Postgres notifications lost; until they are back, "+strings.Join(lost, ", and "),
			slog.Any("error", err), slog.Duration("retry_in", delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// listen listens until the connection fails or ctx is done; listened reports whether
// it got as far as listening.
func (l *Listener) listen(ctx context.Context) (listened bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, l.connConfig)
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		// A stalled connection must not hold the listener in its goodbye.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	handlers := map[string]Handler{}
	for _, c := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.name}.Sanitize()); err != nil {
			return false, err
		}
		handlers[c.name] = c.h
	}
	l.tell(true)
	next := time.Now().Add(l.heartbeat)
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if l.heartbeat > 0 {
			wctx, cancel = context.WithDeadline(ctx, next)
		}
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if h := handlers[n.Channel]; h != nil {
				h.Notified(n.Payload)
			}
		case ctx.Err() == nil && wctx.Err() != nil:
			// A heartbeat is due (notifications that keep coming do not put it off).
			if err := l.beat(ctx, conn); err != nil {
				return true, err
			}
			next = time.Now().Add(l.heartbeat)
		default:
			return true, err
		}
	}
}

// beat sends a heartbeat round trip on conn, which must come back within the
// heartbeat. A notification that arrives meanwhile is kept for the next wait.
func (l *Listener) beat(ctx context.Context, conn *pgx.Conn) error {
	hctx, cancel := context.WithTimeout(ctx, l.heartbeat)
	defer cancel()
	if _, err := conn.Exec(hctx, "SELECT 1"); err != nil {
		return fmt.Errorf("pglisten: no heartbeat from Postgres within %s: %w", l.heartbeat, err)
	}
	return nil
}

// tell tells every handler whether the connection listens.
func (l *Listener) tell(on bool) {
	for _, c := range l.channels {
		c.h.Listening(on)
	}
}
