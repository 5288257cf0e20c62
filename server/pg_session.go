package server

import (
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultDeadSessionTimeout is Config.DeadSessionTimeout's default.
const DefaultDeadSessionTimeout = 60 * time.Second

// bindSessions makes a dead session of this process end within d, on both sides of
// each connection, so that none holds a row lock or an advisory lock (the liveness
// lock) for long after its network is cut without a reset. On Postgres's side:
// idle_in_transaction_session_timeout (d) ends a session left inside a transaction;
// tcp_keepalives_* probe a peer that no longer answers, and tcp_user_timeout (d/2)
// ends a connection whose sent data or keepalive probes go unanswered that long (on
// Linux it replaces the probes' count); client_connection_check_interval (d/6, at
// least a second; Postgres 14 and later) has a session running a statement or waiting
// for a lock look at its socket, so that one waiting behind a lock of its own dead
// process ends when its socket is found dead. Half of d, not d: a session waiting
// behind a lock whose holder idle_in_transaction_session_timeout ends at d would be
// granted the lock just then and send its answer, and a connection with unacknowledged
// data is watched by retransmissions, not keepalives, so it would live d more. On this
// process's side, TCP keepalives and TCP_USER_TIMEOUT (d) do the same for the
// connection. A setting the DATABASE_URL names already is kept. 0 leaves every
// setting as it is.
func bindSessions(cfg *pgconn.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	idle, interval := max(d/3, time.Second), max(d/9, time.Second)
	params := map[string]string{
		"client_connection_check_interval":    strconv.FormatInt(max(d/6, time.Second).Milliseconds(), 10),
		"idle_in_transaction_session_timeout": strconv.FormatInt(d.Milliseconds(), 10),
		"tcp_keepalives_idle":                 strconv.Itoa(int(idle.Seconds())),
		"tcp_keepalives_interval":             strconv.Itoa(int(interval.Seconds())),
		"tcp_keepalives_count":                "3",
		"tcp_user_timeout":                    strconv.FormatInt((d / 2).Milliseconds(), 10),
	}
	for k, v := range params {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	dialer := &net.Dialer{
		Timeout:         cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: idle, Interval: interval, Count: 3},
		Control: func(_, _ string, c syscall.RawConn) error {
			var err error
			if cerr := c.Control(func(fd uintptr) { err = setUserTimeout(fd, d) }); cerr != nil {
				return cerr
			}
			return err
		},
	}
	cfg.DialFunc = dialer.DialContext
}
