// Package fakemcp is a stateful fake upstream MCP server, built with the official Go
// SDK's server, for testing oncebox in front of an MCP server. Its tools:
//
//   - send_mail (no annotations: a write tool): records a mail, the side effect it
//     counts, tagged with its "ref" argument;
//   - find_mail (readOnlyHint): answers {"objects":[...]}, the mails whose ref is its
//     "ref" argument;
//   - purge_mail (destructiveHint): deletes every mail;
//   - count_mail (readOnlyHint): answers {"count":n}.
//
// Reannotate lists a tool again with other annotations (list_changed); GarbageNext and
// GarbageEvery answer calls with truncated JSON (GarbledCalls says which, and how many
// other calls were in flight on the session; SetGarbageHold makes garbage wait for
// one; SetGarbageTypes spells their Content-Type oddly, SSE included). AnswerNext
// answers a call as a hostile upstream would: garbage or a result of any size, streamed,
// under any Content-Type spelling. OfferWipe adds a gated tool, wipe_mailbox
// (destructiveHint), whose runs Wipes returns, and its lookup find_wipe. Fault knobs
// make the next send_mail calls drop the connection after acting, hang
// after acting, or answer isError without acting; SetRandomFaults draws them at random
// for the calls Handler serves. SetNativeKeys makes send_mail deduplicate on the _meta
// key oncebox sends (MetaIdempotencyKey), as an upstream that declares native_keys;
// EffectHook lets a test act between a mail's recording and its answer, AnswerHook once
// the answer is written.
package fakemcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/devkit/fakefault"
)

// Mail is one mail send_mail recorded.
type Mail struct {
	ID      string         `json:"id"`
	Ref     string         `json:"ref,omitempty"`
	To      string         `json:"to"`
	Subject string         `json:"subject"`
	Meta    map[string]any `json:"-"`
}

// MetaIdempotencyKey is the _meta key of a tools/call that carries oncebox's
// idempotency key; in native-keys mode send_mail deduplicates on it.
const MetaIdempotencyKey = "oncebox/idempotency_key"

// MetaOpID is the _meta key of a tools/call that carries oncebox's op id.
const MetaOpID = "oncebox/op_id"

// Refusal is one send_mail call answered isError: nothing was recorded.
type Refusal struct {
	// OpID and Key are the call's _meta op id and idempotency key, if it had them.
	OpID, Key string
	// Ref is the call's ref argument.
	Ref string
}

// Server is the fake upstream.
type Server struct {
	mu        sync.Mutex
	mails     []Mail
	calls     int
	dropNext  int
	hangNext  int
	errorNext int
	release   chan struct{}
	once      sync.Once
	mcp       *mcp.Server

	// native, when set, deduplicates send_mail on _meta MetaIdempotencyKey: keys maps
	// a key to the mail it made, refusedKeys holds the keys it refused; replays counts
	// the calls answered from either.
	native      bool
	keys        map[string]Mail
	refusedKeys map[string]bool
	replays     int
	refusals    []Refusal
	hook        func(Mail)
	// rawNext is the JSON-RPC result the next send_mail answers with, byte for byte.
	rawNext string
	// answerHook is called once a send_mail call's answer is written (Handler only).
	answerHook func(opID string)
	// rawStdio is the raw answer due over StdioTransport (State.RawNext).
	rawStdio rawAnswer
	// garbage counts, by tool, the next calls Handler answers with truncated JSON;
	// garbageEvery, by tool, answers every nth call so (0: none).
	garbage      map[string]int
	garbageEvery map[string]int
	garbageSeen  map[string]int
	garbled      int
	garbledCalls []GarbledCall
	// garbageHold is how long a garbled answer waits for another call in flight on
	// its session (SetGarbageHold).
	garbageHold time.Duration
	// garbageTypes are the Content-Types garbled answers go out with, in turn
	// (SetGarbageTypes); garbageTurn counts the turns.
	garbageTypes []string
	garbageTurn  int
	// answers are the answers due for the next calls of each tool (AnswerNext);
	// answered counts those written.
	answers  map[string][]Answer
	answered int
	// inFlight counts the tools/call requests Handler is serving, by session id.
	inFlight map[string]int

	// wipes are the wipe_mailbox runs (OfferWipe); wipeKeys the native keys they made.
	wipeOffered bool
	wipes       []Wipe
	wipeKeys    map[string]Wipe

	// Random faults (fault.go): random draws them, faults counts them.
	random  fakefault.Injector[FaultKind, FaultKind]
	faults  map[FaultKind]int
	hangFor time.Duration

	// state, when set, is a file holding the mails and the crash knob, so that they
	// outlive the process (a stdio upstream that crashes).
	state string
	exit  func()
}

// State is what a state file holds.
type State struct {
	Mails []Mail `json:"mails"`
	// CrashNext makes the next send_mail calls act, then end the process before
	// answering.
	CrashNext int `json:"crash_next"`
	// RawNext, when set, is the JSON-RPC result the next send_mail answers with over
	// StdioTransport, byte for byte.
	RawNext string `json:"raw_next,omitempty"`
}

// WriteRawNext sets the raw answer of the next send_mail of a state file (see
// State.RawNext), keeping its mails.
func WriteRawNext(path, raw string) error {
	return updateState(path, func(st *State) { st.RawNext = raw })
}

// NewFileBacked returns a fake whose mails and crash knob live in the JSON file path
// ({"mails":[...],"crash_next":n}; a missing file is empty); exit ends the process
// when a crash is due. Every tool call reads the file (and send_mail and purge_mail
// write it) under a lock on path+".lock", so several processes may share one file: a
// mail one of them sends is found by the others' find_mail.
func NewFileBacked(path string, exit func()) (*Server, error) {
	s := New()
	s.state, s.exit = path, exit
	st, err := ReadState(path)
	if err != nil {
		return nil, err
	}
	s.mails = st.Mails
	return s, nil
}

// ReadState reads a state file; a missing one is empty.
func ReadState(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// WriteCrashNext sets the crash knob of a state file, keeping its mails.
func WriteCrashNext(path string, n int) error {
	return updateState(path, func(st *State) { st.CrashNext = n })
}

// updateState changes a state file under its lock.
func updateState(path string, change func(st *State)) error {
	unlock, err := lockState(path)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := ReadState(path)
	if err != nil {
		return err
	}
	change(&st)
	return writeState(path, st)
}

// syncState, for a file-backed fake, reads the state file under its lock, lets change
// modify it (writing it back when change reports so) and takes its mails as the fake's;
// s.mu must be held. A fake without a state file calls change with nothing.
func (s *Server) syncState(change func(st *State) (write bool)) error {
	if s.state == "" {
		change(nil)
		return nil
	}
	unlock, err := lockState(s.state)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := ReadState(s.state)
	if err != nil {
		return err
	}
	if change(&st) {
		if err := writeState(s.state, st); err != nil {
			return err
		}
	}
	s.mails = st.Mails
	return nil
}

func writeState(path string, st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// New returns an empty fake upstream.
func New() *Server {
	s := &Server{release: make(chan struct{}), keys: map[string]Mail{}, refusedKeys: map[string]bool{}, faults: map[FaultKind]int{},
		garbage: map[string]int{}, garbageEvery: map[string]int{}, garbageSeen: map[string]int{}, inFlight: map[string]int{},
		wipeKeys: map[string]Wipe{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "fakemcp", Version: "1"}, nil)
	f := false
	t := true
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "send_mail", Description: "Send a mail."}, s.sendMail)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "find_mail", Description: "Find the mails sent with a ref.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &f}}, s.findMail)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "purge_mail", Description: "Delete every mail.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &t}}, s.purgeMail)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "count_mail", Description: "Count the mails.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.countMail)
	return s
}

// SendArgs are send_mail's arguments.
type SendArgs struct {
	To      string `json:"to" jsonschema:"the recipient"`
	Subject string `json:"subject" jsonschema:"the subject"`
	Ref     string `json:"ref,omitempty" jsonschema:"a reference the mail is tagged with"`
}

// FindArgs are find_mail's arguments.
type FindArgs struct {
	Ref string `json:"ref" jsonschema:"the reference to look for"`
}

// Found is find_mail's answer.
type Found struct {
	Objects []Mail `json:"objects"`
}

// Count is count_mail's answer.
type Count struct {
	Count int `json:"count"`
}

func (s *Server) sendMail(ctx context.Context, req *mcp.CallToolRequest, a SendArgs) (*mcp.CallToolResult, Mail, error) {
	meta := map[string]any{}
	for k, v := range req.Params.Meta {
		meta[k] = v
	}
	fault, _ := meta[metaFault].(string)
	delete(meta, metaFault)
	key, _ := meta[MetaIdempotencyKey].(string)
	opID, _ := meta[MetaOpID].(string)

	s.mu.Lock()
	s.calls++
	if prev, ok := s.keys[key]; ok && s.native && key != "" {
		// The key was carried out before: answer what it made, and do nothing.
		s.replays++
		s.mu.Unlock()
		return nil, prev, nil
	}
	if s.refusedKeys[key] && s.native && key != "" {
		// The key was refused before: a native-keys upstream replays a key's answer,
		// a refusal too, so a late copy of the refused call (one a partition held
		// back, say) does not act after its refusal was answered.
		s.replays++
		s.mu.Unlock()
		return refused(), Mail{}, nil
	}
	if s.errorNext > 0 || fault == FaultIsError.String() {
		if fault != FaultIsError.String() {
			s.errorNext--
		}
		s.refusals = append(s.refusals, Refusal{OpID: opID, Key: key, Ref: a.Ref})
		if s.native && key != "" {
			s.refusedKeys[key] = true
		}
		s.mu.Unlock()
		return refused(), Mail{}, nil
	}
	var m Mail
	crash := false
	err := s.syncState(func(st *State) bool {
		m = Mail{ID: "mail_" + itoa(len(s.mails)+1), Ref: a.Ref, To: a.To, Subject: a.Subject, Meta: meta}
		if st == nil {
			s.mails = append(s.mails, m)
			return false
		}
		m.ID = "mail_" + itoa(len(st.Mails)+1)
		st.Mails = append(st.Mails, m)
		if st.RawNext != "" {
			s.rawStdio, st.RawNext = rawAnswer{mailID: m.ID, raw: st.RawNext}, ""
		}
		if crash = st.CrashNext > 0; crash {
			st.CrashNext--
		}
		return true
	})
	if err != nil {
		s.mu.Unlock()
		return nil, Mail{}, err
	}
	if crash {
		s.exit() // acted, and never answers
	}
	if s.native && key != "" {
		s.keys[key] = m
	}
	hang := s.hangNext > 0 || fault == FaultHangAfterActing.String()
	if hang && fault != FaultHangAfterActing.String() {
		s.hangNext--
	}
	hook, hangFor := s.hook, s.hangFor
	s.mu.Unlock()
	if hook != nil {
		hook(m)
	}
	if hang {
		var bound <-chan time.Time
		if hangFor > 0 {
			t := time.NewTimer(hangFor)
			defer t.Stop()
			bound = t.C
		}
		select {
		case <-ctx.Done():
			return nil, Mail{}, ctx.Err() // nobody waits for the answer any more
		case <-s.release:
		case <-bound:
		}
		// A late answer, but the true one: the mail was sent. (An error here would be
		// answered as isError, a refusal, while the upstream has acted.)
	}
	return nil, m, nil
}

// refused is send_mail's refusal: isError, nothing recorded.
func refused() *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "mailbox full"}}}
}

func (s *Server) findMail(_ context.Context, _ *mcp.CallToolRequest, a FindArgs) (*mcp.CallToolResult, Found, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.syncState(func(*State) bool { return false }); err != nil {
		return nil, Found{}, err
	}
	out := Found{Objects: []Mail{}}
	for _, m := range s.mails {
		if m.Ref == a.Ref {
			out.Objects = append(out.Objects, m)
		}
	}
	return nil, out, nil
}

func (s *Server) purgeMail(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, Count, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	err := s.syncState(func(st *State) bool {
		n = len(s.mails)
		if st == nil {
			s.mails = nil
			return false
		}
		n, st.Mails = len(st.Mails), nil
		return true
	})
	s.keys, s.refusedKeys = map[string]Mail{}, map[string]bool{}
	return nil, Count{Count: n}, err
}

func (s *Server) countMail(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, Count, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.syncState(func(*State) bool { return false }); err != nil {
		return nil, Count{}, err
	}
	return nil, Count{Count: len(s.mails)}, nil
}

// Mails returns the mails sent so far.
func (s *Server) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Calls counts send_mail calls, whatever they did.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// SetNativeKeys turns native-keys mode on or off: send_mail deduplicates on _meta
// MetaIdempotencyKey, answering a key it carried out before with the mail that key made,
// and a key it refused with the refusal, without acting (kept in memory, not in a state
// file).
func (s *Server) SetNativeKeys(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.native = on
}

// Replays counts the send_mail calls answered from a native key, without acting.
func (s *Server) Replays() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replays
}

// Refusals returns the send_mail calls answered isError.
func (s *Server) Refusals() []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refusal(nil), s.refusals...)
}

// EffectHook sets f to be called with each mail once it is recorded, before its call is
// answered (a nil f clears it). f runs on the call's goroutine.
func (s *Server) EffectHook(f func(Mail)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = f
}

// AnswerHook sets f to be called, by Handler, once a send_mail call's answer is
// written and flushed to the client, with the call's _meta op id (a nil f clears it).
// It lets a test stop the caller between the upstream's answer and whatever the caller
// does with it.
func (s *Server) AnswerHook(f func(opID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answerHook = f
}

// DropAfterActing makes the next n send_mail calls act, then lose their answer (the
// HTTP connection is closed without a response).
func (s *Server) DropAfterActing(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropNext = n
}

// HangAfterActing makes the next n send_mail calls act, then hold their answer until
// their request is cancelled (no answer) or Release is called (the mail, late).
func (s *Server) HangAfterActing(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hangNext = n
}

// Release answers the calls HangAfterActing holds with their mails, late, and any
// later ones at once.
func (s *Server) Release() {
	s.once.Do(func() { close(s.release) })
}

// FailNext makes the next n send_mail calls answer isError without acting.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorNext = n
}

// AddTool adds a tool called name, without annotations (a write tool), that answers
// {"echo": <its arguments>}: an upstream whose tools change while oncebox runs. Each
// open session is told (notifications/tools/list_changed).
func (s *Server) AddTool(name, description string) {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: description},
		func(_ context.Context, _ *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"echo": a}, nil
		})
}

// Reannotate lists one of the fake's tools (wipe_mailbox too, once offered) again with
// other annotations (nil: none), the same handler and description: an upstream that
// changes its mind about a tool while oncebox runs, e.g. listing purge_mail as
// read-only. Each open session is told (notifications/tools/list_changed).
func (s *Server) Reannotate(name string, ann *mcp.ToolAnnotations) {
	switch name {
	case "send_mail":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: "Send a mail.", Annotations: ann}, s.sendMail)
	case "find_mail":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: "Find the mails sent with a ref.", Annotations: ann}, s.findMail)
	case "purge_mail":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: "Delete every mail.", Annotations: ann}, s.purgeMail)
	case "count_mail":
		mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: "Count the mails.", Annotations: ann}, s.countMail)
	case "wipe_mailbox":
		s.mu.Lock()
		offered := s.wipeOffered
		s.mu.Unlock()
		if !offered {
			panic("fakemcp: wipe_mailbox is not offered (OfferWipe)")
		}
		s.addWipe(ann)
	default:
		panic("fakemcp: no tool " + name)
	}
}

// GarbageNext makes the next n calls of tool over HTTP (Handler) run, then be answered
// with truncated JSON: an upstream whose answer to one call is broken.
func (s *Server) GarbageNext(tool string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.garbage[tool] = n
}

// GarbageEvery makes every nth call of tool over HTTP (Handler) be answered with
// truncated JSON after it ran (0: none).
func (s *Server) GarbageEvery(tool string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.garbageEvery[tool] = n
}

// Garbled counts the calls answered with truncated JSON.
func (s *Server) Garbled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.garbled
}

// GarbledCall is one call Handler answered with truncated JSON.
type GarbledCall struct {
	// Tool is the tool called; OpID the call's _meta op id, if it had one; Ref its
	// "ref" argument, if it had one (a lookup's: the op it looks for).
	Tool, OpID, Ref string
	// Concurrent counts the other tools/call requests in flight on the same session
	// (Mcp-Session-Id) when the truncated answer was written.
	Concurrent int
}

// SetGarbageHold makes a garbled answer wait, up to d, until another tools/call is in
// flight on its session before it is written: garbage that lands while the session
// carries other calls (0, the default: written at once).
func (s *Server) SetGarbageHold(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.garbageHold = d
}

// holdGarbage waits, up to the garbage hold, until another call than this one is in
// flight on session sid.
func (s *Server) holdGarbage(ctx context.Context, sid string) {
	s.mu.Lock()
	hold := s.garbageHold
	s.mu.Unlock()
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.mu.Lock()
		busy := s.inFlight[sid] > 1
		s.mu.Unlock()
		if busy {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// GarbledCalls returns the calls answered with truncated JSON, in order.
func (s *Server) GarbledCalls() []GarbledCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]GarbledCall(nil), s.garbledCalls...)
}

// garbleNow reports whether this call of tool is answered with garbage. Called with mu
// held.
func (s *Server) garbleNow(tool string) bool {
	if s.garbage[tool] > 0 {
		s.garbage[tool]--
		s.garbled++
		return true
	}
	if every := s.garbageEvery[tool]; every > 0 {
		s.garbageSeen[tool]++
		if s.garbageSeen[tool]%every == 0 {
			s.garbled++
			return true
		}
	}
	return false
}

// RawResultNext makes the next send_mail call over HTTP (Handler) act, then answer
// with raw as its JSON-RPC result, byte for byte: field order, spacing and fields the
// protocol does not define included.
func (s *Server) RawResultNext(raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rawNext = raw
}

// rawAnswer is a raw JSON-RPC result to send instead of the SDK's for the answer that
// carries mailID.
type rawAnswer struct {
	mailID, raw string
}

// StdioTransport serves the fake over stdin and stdout; a send_mail whose state file
// asked for it (WriteRawNext) is answered with the raw result.
func (s *Server) StdioTransport() mcp.Transport {
	return &mcp.IOTransport{Reader: os.Stdin, Writer: &rawWriter{s: s, w: os.Stdout}}
}

// rawWriter writes the SDK's messages, one per Write, replacing the result of the
// answer a rawAnswer is due for.
type rawWriter struct {
	s *Server
	w io.Writer
}

func (r *rawWriter) Write(p []byte) (int, error) {
	r.s.mu.Lock()
	due := r.s.rawStdio
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	match := due.raw != "" && json.Unmarshal(p, &resp) == nil && len(resp.ID) > 0 && bytes.Contains(resp.Result, []byte(`"`+due.mailID+`"`))
	if match {
		r.s.rawStdio = rawAnswer{}
	}
	r.s.mu.Unlock()
	if !match {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, `{"jsonrpc":"2.0","id":`+string(resp.ID)+`,"result":`+due.raw+"}\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (r *rawWriter) Close() error { return nil }

// MCP returns the SDK server, to serve over any transport (stdio, in memory).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler serves the fake over streamable HTTP, with the drop fault and the random
// faults.
func (s *Server) Handler() http.Handler {
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Meta      map[string]any `json:"_meta"`
				Arguments struct {
					Ref any `json:"ref"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		drop, raw := false, ""
		var answered func(string)
		if msg.Method == "tools/call" {
			sid := r.Header.Get("Mcp-Session-Id")
			s.mu.Lock()
			s.inFlight[sid]++
			garble := s.garbleNow(msg.Params.Name)
			answer, hostile, ct := Answer{}, false, "application/json"
			if garble {
				ct = s.garbageType()
			} else {
				answer, hostile = s.nextAnswer(msg.Params.Name)
			}
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.inFlight[sid]--; s.inFlight[sid] == 0 {
					delete(s.inFlight, sid)
				}
			}()
			if hostile {
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				inner.ServeHTTP(httptest.NewRecorder(), r) // runs; its answer is replaced
				writeAnswer(w, msg.ID, answer)
				return
			}
			if garble {
				rec := httptest.NewRecorder()
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				inner.ServeHTTP(rec, r) // runs; its answer is cut in half
				opID, _ := msg.Params.Meta[MetaOpID].(string)
				s.holdGarbage(r.Context(), sid)
				s.mu.Lock()
				ref, _ := msg.Params.Arguments.Ref.(string)
				s.garbledCalls = append(s.garbledCalls, GarbledCall{Tool: msg.Params.Name, OpID: opID, Ref: ref, Concurrent: s.inFlight[sid] - 1})
				s.mu.Unlock()
				out := rec.Body.Bytes()
				writeBody(w, ct, out[:len(out)/2])
				return
			}
		}
		if msg.Method == "tools/call" && msg.Params.Name == "send_mail" {
			s.mu.Lock()
			raw, s.rawNext = s.rawNext, ""
			answered = s.answerHook
			if s.dropNext > 0 && s.errorNext == 0 {
				s.dropNext--
				drop = true
			} else if kind, ok := s.drawFault(); ok {
				if kind == FaultDropAfterActing {
					drop = true
				} else {
					body = withMeta(body, metaFault, kind.String())
				}
			}
			s.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if raw != "" && !drop {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r) // acts; its answer's result is replaced
			var resp struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &resp)
			for k, v := range rec.Header() {
				if k != "Content-Length" {
					w.Header()[k] = v
				}
			}
			w.WriteHeader(rec.Code)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(resp.ID)+`,"result":`+raw+`}`)
			afterAnswer(w, answered, msg.Params.Meta)
			return
		}
		if !drop {
			inner.ServeHTTP(w, r)
			afterAnswer(w, answered, msg.Params.Meta)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r) // acts, and its answer is thrown away
		panic(http.ErrAbortHandler)
	})
}

// afterAnswer flushes the answer written to w and calls answered, if set, with the op id
// of the call's _meta.
func afterAnswer(w http.ResponseWriter, answered func(string), meta map[string]any) {
	if answered == nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	opID, _ := meta[MetaOpID].(string)
	answered(opID)
}

// withMeta returns the JSON-RPC request body with params._meta[k] = v, or body as it is
// when it cannot be read.
func withMeta(body []byte, k, v string) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var msg map[string]any
	if dec.Decode(&msg) != nil {
		return body
	}
	params, _ := msg["params"].(map[string]any)
	if params == nil {
		return body
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[k] = v
	params["_meta"] = meta
	out, err := json.Marshal(msg)
	if err != nil {
		return body
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
