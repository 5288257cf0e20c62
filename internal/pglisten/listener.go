// Package pglisten listens on Postgres notification channels over one dedicated
// connection, outside any pool, and hands each notification to the handler of its
// channel: a process holds one listening connection however many channels it follows
// (the long polls' settled ops, the token cache's token changes).
//
// A notification is delivered only to a session that listened when it was sent, so a
// handler is told when listening starts and when it stops: what it remembers from
// before, or from a time nobody listened, may be stale.
package pglisten

import (
	"context"
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

// Listener listens on the channels of its handlers.
type Listener struct {
	connConfig *pgx.ConnConfig
	logger     *slog.Logger
	channels   []channel
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
	return &Listener{connConfig: connConfig, logger: logger}
}

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
	defer conn.Close(context.WithoutCancel(ctx))
	handlers := map[string]Handler{}
	for _, c := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.name}.Sanitize()); err != nil {
			return false, err
		}
		handlers[c.name] = c.h
	}
	l.tell(true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if h := handlers[n.Channel]; h != nil {
			h.Notified(n.Payload)
		}
	}
}

// tell tells every handler whether the connection listens.
func (l *Listener) tell(on bool) {
	for _, c := range l.channels {
		c.h.Listening(on)
	}
}
