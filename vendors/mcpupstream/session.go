package mcpupstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/oncebox/oncebox/internal/sameorigin"
	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// Reconnection backoff of an upstream whose session could not be opened or ended: the
// first wait, doubled after each failure up to the last.
const (
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 30 * time.Second
)

// Observer is told about upstream MCP calls and sessions, for metrics. Its methods
// must be quick and safe for concurrent use.
type Observer interface {
	// UpstreamCalled is called after each tools/call to an upstream: kind is
	// "dispatch", "read" or "lookup"; outcome is "result", "is_error", "refused"
	// (invalid params or unknown tool), "error" (another JSON-RPC error), "lost" (sent,
	// no answer) or "not_sent" (no session could be opened).
	UpstreamCalled(upstream, kind, outcome string, took time.Duration)
	// UpstreamConnected is called when an upstream's session opens (true) or ends or
	// cannot be opened (false).
	UpstreamConnected(upstream string, connected bool)
	// UpstreamRestarted is called when a session is opened again after one ended or
	// broke (a stdio upstream's program started again).
	UpstreamRestarted(upstream string)
	// UpstreamRateLimited is called when a call waits for the upstream's rate limit.
	UpstreamRateLimited(upstream string)
}

type nopObserver struct{}

func (nopObserver) UpstreamCalled(string, string, string, time.Duration) {}
func (nopObserver) UpstreamConnected(string, bool)                       {}
func (nopObserver) UpstreamRestarted(string)                             {}
func (nopObserver) UpstreamRateLimited(string)                           {}

// Health is what /healthz says of one upstream. It holds no secret: header and
// environment values are cut from the last error.
type Health struct {
	// Transport is "http" or "stdio".
	Transport string `json:"transport"`
	// Connected says a session is open now.
	Connected bool `json:"connected"`
	// LastError is why the last session could not be opened or ended, if one did.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when.
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Restarts counts the sessions opened again after one ended or broke since the
	// upstream was connected (a stdio program started again, for a stdio upstream).
	Restarts int `json:"restarts"`
}

// Config is one upstream MCP server and how to talk to it.
type Config struct {
	// Name is the upstream's name, in errors, logs and the observer's calls.
	Name string
	// URL is the streamable HTTP endpoint, or "" for a stdio upstream.
	URL string
	// Headers are sent with every HTTP request to the upstream's origin. Never logged.
	Headers map[string]string
	// Command is the stdio upstream's program, or "" for an HTTP upstream.
	Command string
	// Args are the program's arguments.
	Args []string
	// Env is the program's whole environment besides PATH and HOME. Never logged.
	Env map[string]string
	// Vars are the values of the ${VAR}s expanded in Headers and Env: cut, with the
	// header and environment values, out of the upstream's errors, results and logs
	// (see secretsOf). Never logged.
	Vars []string
	// Rate is how many tools/call requests per second the session sends, every kind
	// of call together. 0: no limit.
	Rate float64
	// Burst is how many calls may go at once above Rate. Used only with Rate.
	Burst int
	// MaxResultBytes bounds one answer of the upstream: a larger one fails its call,
	// and only it. Defaults to DefaultMaxResultBytes.
	MaxResultBytes int64
	// Timeout bounds connecting, listing and each call. Defaults to 10 seconds.
	Timeout time.Duration
	// HTTPClient's transport carries an HTTP upstream's requests. Optional.
	HTTPClient *http.Client
	// Logger receives the session's records and a stdio program's stderr. Defaults
	// to discarding them.
	Logger *slog.Logger
	// Observer is told about calls and sessions. Optional.
	Observer Observer
	// OnToolsChanged is called with Name when the upstream announces that its tools
	// changed (notifications/tools/list_changed). Optional: without it the
	// announcements are not listened to.
	OnToolsChanged func(upstream string)
}

// DefaultMaxResultBytes is Config.MaxResultBytes when it is not set.
const DefaultMaxResultBytes = 1 << 20

// Session is one upstream's client session. A session that ends (a stdio program
// that exits, a broken connection) is opened again in the background with backoff,
// and on the next call. It is safe for concurrent use.
type Session struct {
	up       Config
	client   *mcp.Client
	timeout  time.Duration
	http     *http.Client
	logger   *slog.Logger
	observer Observer
	// limiter is the upstream's rate limit, nil without one.
	limiter *rate.Limiter
	// stop is closed by Close.
	stop chan struct{}
	// listens says the session listens for notifications (tools/list_changed).
	listens bool
	// tap catches the raw results of dispatches.
	tap *rawTap
	// secrets are cut out of the upstream's errors, results and stderr (secretsOf).
	secrets []string

	mu      sync.Mutex
	session *mcp.ClientSession
	closed  bool
	// resting says Rest ended the session: it is not opened again in the
	// background, only by the next call.
	resting bool
	// opened counts the sessions opened; each after the first is a restart.
	opened int
	// failures counts the failed connects and ended sessions since the last good
	// call; the backoff grows with it. nextTry is when a connect may be tried again.
	failures  int
	nextTry   time.Time
	lastErr   string
	lastErrAt time.Time
	// seen is what Health reports, published by publish whenever the fields above
	// change: Health does not wait for mu, which a connect holds for up to timeout.
	seen atomic.Pointer[Health]
}

// New returns the session of the upstream cfg describes. It connects on the first
// call (List, Read, Dispatch, Lookup), not before.
func New(cfg Config) *Session {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	u := &Session{up: cfg, timeout: cfg.Timeout, http: cfg.HTTPClient, logger: cfg.Logger, observer: cfg.Observer,
		stop: make(chan struct{}), listens: cfg.OnToolsChanged != nil, tap: newRawTap(), secrets: secretsOf(cfg)}
	if cfg.Rate > 0 {
		u.limiter = rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst)
	}
	var copts *mcp.ClientOptions
	if cfg.OnToolsChanged != nil {
		name, changed := cfg.Name, cfg.OnToolsChanged
		copts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			changed(name)
		}}
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "oncebox", Version: "1"}, copts)
	return u
}

// headerTransport adds an upstream's headers to every request to the upstream's
// origin, and to no other: the client refuses redirects to another origin
// (sameorigin.CheckRedirect), and a request elsewhere would go without them.
type headerTransport struct {
	headers map[string]string
	origin  *url.URL
	base    http.RoundTripper
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !sameorigin.Same(r.URL, h.origin) {
		return h.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// upstreamTransport is the transport of HTTP upstreams that bring no client of their
// own, shared by their sessions (as http.DefaultTransport was): its connections are
// aborted when closed (vendorhttp), so a call given up on is not delivered later.
var upstreamTransport = vendorhttp.Transport()

// httpBase is the transport an HTTP upstream's requests go through: the session's
// client's, else upstreamTransport.
func (u *Session) httpBase() http.RoundTripper {
	if u.http != nil && u.http.Transport != nil {
		return u.http.Transport
	}
	return upstreamTransport
}

func (u *Session) transport() mcp.Transport {
	if u.up.URL != "" {
		base := http.RoundTripper(&tapTransport{tap: u.tap, base: u.httpBase(), limit: u.limit()})
		origin, _ := url.Parse(u.up.URL) // checked when the file was read
		client := &http.Client{Transport: &headerTransport{headers: u.up.Headers, origin: origin, base: base},
			CheckRedirect: sameorigin.CheckRedirect(fmt.Sprintf("upstream %q", u.up.Name))}
		// The client reads an SSE event up to MaxEventSize and breaks the session past
		// it: the tap refuses one past the limit first.
		return &mcp.StreamableClientTransport{Endpoint: u.up.URL, HTTPClient: client, DisableStandaloneSSE: !u.listens,
			MaxEventSize: int(max(u.limit()+4096, mcp.DefaultMaxEventSize))}
	}
	cmd := exec.Command(u.up.Command, u.up.Args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range slices.Sorted(maps.Keys(u.up.Env)) {
		cmd.Env = append(cmd.Env, k+"="+u.up.Env[k])
	}
	cmd.Stderr = &logWriter{logger: u.logger, upstream: u.up.Name, scrub: u.scrub}
	cmd.SysProcAttr = procAttr()
	return &tapStdio{inner: &mcp.CommandTransport{Command: cmd}, tap: u.tap, limit: u.limit()}
}

// limit is the upstream's max_result_bytes.
func (u *Session) limit() int64 { return u.up.MaxResultBytes }

// logWriter sends a stdio upstream's stderr to the log, a record per line, with the
// upstream's environment values cut out.
type logWriter struct {
	logger   *slog.Logger
	upstream string
	scrub    func(string) string
}

func (w *logWriter) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		w.logger.Info("upstream stderr", slog.String("upstream", w.upstream), slog.String("text", w.scrub(line)))
	}
	return len(p), nil
}

// backoff is the wait before the next connect after n failures.
func backoff(n int) time.Duration {
	d := reconnectFirst
	for i := 1; i < n && d < reconnectMax; i++ {
		d *= 2
	}
	return min(d, reconnectMax)
}

// scrub cuts the upstream's secrets (secretsOf) out of msg.
func (u *Session) scrub(msg string) string { return scrubText(u.secrets, msg) }

// failed records why a session could not be opened or ended, and backs off. Called
// with mu held.
func (u *Session) failed(err error) {
	u.failures++
	u.nextTry = time.Now().Add(backoff(u.failures))
	u.lastErr, u.lastErrAt = u.scrub(err.Error()), time.Now()
	u.publish()
}

// get returns the open session, connecting when there is none (not before the backoff
// after a failure has passed).
func (u *Session) get(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != nil {
		return u.session, nil
	}
	if u.closed {
		return nil, fmt.Errorf("upstream %s: oncebox is shutting down", u.up.Name)
	}
	if wait := time.Until(u.nextTry); wait > 0 {
		return nil, fmt.Errorf("upstream %s is unreachable (%s); the next attempt to connect is in %s", u.up.Name, u.lastErr, wait.Round(time.Millisecond))
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	s, err := u.client.Connect(cctx, u.transport(), nil)
	if err != nil {
		u.failed(err)
		u.observer.UpstreamConnected(u.up.Name, false)
		return nil, fmt.Errorf("connect to upstream %s: %s", u.up.Name, u.scrub(err.Error()))
	}
	u.session = s
	u.resting = false
	u.opened++
	u.publish()
	if u.opened > 1 {
		u.observer.UpstreamRestarted(u.up.Name)
		u.logger.Info("upstream session opened again", slog.String("upstream", u.up.Name), slog.Int("restarts", u.opened-1))
	}
	u.observer.UpstreamConnected(u.up.Name, true)
	go u.watch(s)
	return s, nil
}

// watch waits for s to end. Unless oncebox closed it, the session is dropped and
// opened again in the background, with backoff: a stdio program that died is started
// again without waiting for the next call.
func (u *Session) watch(s *mcp.ClientSession) {
	err := s.Wait()
	u.mu.Lock()
	if u.closed || (u.resting && u.session == nil) {
		u.mu.Unlock()
		return
	}
	if u.session == s {
		u.session = nil
	}
	if err == nil {
		err = errors.New("the session ended")
	}
	u.failed(fmt.Errorf("session ended: %w", err))
	u.mu.Unlock()
	u.observer.UpstreamConnected(u.up.Name, false)
	u.logger.Warn("upstream session ended; opening it again", slog.String("upstream", u.up.Name), slog.String("error", u.scrub(err.Error())))
	for {
		u.mu.Lock()
		if u.closed || u.resting || u.session != nil {
			u.mu.Unlock()
			return
		}
		wait := max(time.Until(u.nextTry), 0)
		u.mu.Unlock()
		select {
		case <-u.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), u.timeout)
		_, err := u.get(ctx)
		cancel()
		if err == nil {
			return
		}
	}
}

// drop closes s if it is still the open session, so the next call reconnects.
func (u *Session) drop(s *mcp.ClientSession) {
	u.mu.Lock()
	if u.session != s {
		u.mu.Unlock()
		return
	}
	u.session = nil
	u.publish()
	u.mu.Unlock()
	_ = s.Close() // watch sees it end, and opens a new one
}

// Rest ends the session (a stdio upstream's process with it) without closing u for
// good: nothing opens it again in the background; the next call does.
func (u *Session) Rest() {
	u.mu.Lock()
	s := u.session
	u.session, u.resting = nil, true
	u.publish()
	u.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// Close closes u for good, ending its session (and a stdio upstream's process).
func (u *Session) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.closed = true
		close(u.stop)
	}
	if u.session != nil {
		_ = u.session.Close()
		u.session = nil
	}
}

// publish makes the session's state what health reports. Called with mu held.
func (u *Session) publish() {
	h := Health{Transport: "http", Connected: u.session != nil, LastError: u.lastErr, Restarts: max(u.opened-1, 0)}
	if u.up.URL == "" {
		h.Transport = "stdio"
	}
	if !u.lastErrAt.IsZero() {
		at := u.lastErrAt.UTC()
		h.LastErrorAt = &at
	}
	u.seen.Store(&h)
}

// Health reports the upstream's session.
func (u *Session) Health() Health {
	if h := u.seen.Load(); h != nil {
		return *h
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.publish()
	return *u.seen.Load()
}

// ok notes a call the upstream answered: the backoff starts again from its first wait.
func (u *Session) ok() {
	u.mu.Lock()
	u.failures = 0
	u.mu.Unlock()
}

// Throttle takes a slot of the upstream's rate limit for a dispatch: 0 when the call
// may go now, else how long to wait (nothing is taken then).
func (u *Session) Throttle() time.Duration {
	if u.limiter == nil {
		return 0
	}
	r := u.limiter.Reserve()
	d := r.Delay()
	if d <= 0 {
		return 0
	}
	r.Cancel()
	u.observer.UpstreamRateLimited(u.up.Name)
	return d
}

// wait waits for a slot of the upstream's rate limit, within ctx and the call
// timeout.
func (u *Session) wait(ctx context.Context) error {
	if u.limiter == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	if u.limiter.Tokens() < 1 {
		u.observer.UpstreamRateLimited(u.up.Name)
	}
	if err := u.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("upstream %s: rate limit of %g calls per second: %w", u.up.Name, u.up.Rate, err)
	}
	return nil
}

// answerRefusedError is a dispatch whose answer oncebox would not read: larger than
// the upstream's max_result_bytes ("too_large"), or no JSON-RPC message ("malformed").
// Only that call fails; the session goes on.
type answerRefusedError struct {
	Reason string
	Limit  int64
	Err    error
}

func (e *answerRefusedError) Error() string { return e.Err.Error() }
func (e *answerRefusedError) Unwrap() error { return e.Err }

// errNotSent is a call that never reached the upstream (no session could be opened,
// the rate limit held it, or no connection could be had for its HTTP request).
var errNotSent = errors.New("not sent")

// call calls a tool; kind ("dispatch", "read", "lookup") labels it for the observer.
// A read or lookup waits for the rate limit; a dispatch took its slot before its op
// was claimed (throttle). An error is errNotSent (wrapped) when the request was never
// written, one upstreamError finds when the upstream answered with a JSON-RPC error,
// or else the call's answer was lost (a timeout, a broken connection, a dead process,
// an HTTP answer that is no JSON-RPC answer) and the session is dropped.
func (u *Session) call(ctx context.Context, kind string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, _, err := u.callRaw(ctx, kind, p)
	return res, err
}

// callRaw is call, and also returns the result as it came on the wire when it was
// caught (a dispatch's: its _meta names its op id), else nil.
func (u *Session) callRaw(ctx context.Context, kind string, p *mcp.CallToolParams) (*mcp.CallToolResult, json.RawMessage, error) {
	res, raw, err := u.callUnscrubbed(ctx, kind, p)
	if err != nil {
		return nil, nil, scrubErr(u.secrets, err)
	}
	res, raw = scrubResult(u.secrets, u.up.Name, res, raw)
	return res, raw, nil
}

// callUnscrubbed is callRaw before the upstream's secrets are cut out of its answer.
func (u *Session) callUnscrubbed(ctx context.Context, kind string, p *mcp.CallToolParams) (*mcp.CallToolResult, json.RawMessage, error) {
	start := time.Now()
	outcome := "not_sent"
	defer func() { u.observer.UpstreamCalled(u.up.Name, kind, outcome, time.Since(start)) }()
	if kind != "dispatch" {
		if err := u.wait(ctx); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errNotSent, err)
		}
	}
	s, err := u.get(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	caught := func() (json.RawMessage, string) { return nil, "" }
	if opID, ok := p.Meta[MetaOpID].(string); ok && opID != "" {
		caught = u.tap.expect(opID)
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	res, err := s.CallTool(cctx, p)
	raw, spoiled := caught()
	if err != nil && spoiled != "" {
		outcome = "error"
		u.logger.Warn("upstream answer refused: only its call fails", slog.String("upstream", u.up.Name),
			slog.String("tool", p.Name), slog.String("reason", spoiled), slog.Int64("max_result_bytes", u.limit()))
		return nil, nil, &answerRefusedError{Reason: spoiled, Limit: u.limit(), Err: err}
	}
	if err != nil {
		if we, answered := upstreamError(err); answered {
			outcome = "error"
			if we.Code == jsonrpc.CodeInvalidParams || we.Code == jsonrpc.CodeMethodNotFound {
				outcome = "refused"
			}
			return nil, nil, err
		}
		u.drop(s)
		if errors.Is(err, errNotSent) {
			// No connection could be had (tapTransport): the upstream is down, and
			// the session with it, most likely; the next call opens a new one.
			return nil, nil, err
		}
		outcome = "lost"
		return nil, nil, err
	}
	u.ok()
	outcome = "result"
	if res.IsError {
		outcome = "is_error"
	}
	if !json.Valid(raw) {
		raw = nil
	}
	return res, raw, nil
}

// codeRejectedByTransport is the code of the error the SDK's client makes of its own
// transport failures (its internal jsonrpc2.ErrRejected, "rejected by transport"): an
// HTTP request that failed, even after it was written (a connection closed before the
// answer), an answer it could not read, a 429 or 5xx status without a JSON-RPC error.
const codeRejectedByTransport = -32005

// upstreamError returns the JSON-RPC error the upstream answered a call with. A
// transport failure the SDK reports as a JSON-RPC error (codeRejectedByTransport) is no
// answer: the request may have reached the upstream, and nothing came back.
func upstreamError(err error) (*jsonrpc.Error, bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code == codeRejectedByTransport {
		return nil, false
	}
	return we, true
}

// List lists the upstream's tools.
func (u *Session) List(ctx context.Context) ([]*mcp.Tool, error) {
	s, err := u.get(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	var out []*mcp.Tool
	for t, err := range s.Tools(cctx, nil) {
		if err != nil {
			u.drop(s)
			return nil, scrubErr(u.secrets, fmt.Errorf("list the tools of upstream %s: %w", u.up.Name, err))
		}
		out = append(out, t)
	}
	u.ok()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
