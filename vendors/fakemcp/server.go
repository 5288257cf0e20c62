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
// Fault knobs make the next send_mail calls drop the connection after acting, hang
// after acting, or answer isError without acting.
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Mail is one mail send_mail recorded.
type Mail struct {
	ID      string         `json:"id"`
	Ref     string         `json:"ref,omitempty"`
	To      string         `json:"to"`
	Subject string         `json:"subject"`
	Meta    map[string]any `json:"-"`
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
}

// NewFileBacked returns a fake whose mails and crash knob live in the JSON file path
// ({"mails":[...],"crash_next":n}; a missing file is empty); exit ends the process
// when a crash is due.
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
	st, err := ReadState(path)
	if err != nil {
		return err
	}
	st.CrashNext = n
	return writeState(path, st)
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
	s := &Server{release: make(chan struct{})}
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
	s.mu.Lock()
	s.calls++
	if s.errorNext > 0 {
		s.errorNext--
		s.mu.Unlock()
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "mailbox full"}}}, Mail{}, nil
	}
	m := Mail{ID: "mail_" + itoa(len(s.mails)+1), Ref: a.Ref, To: a.To, Subject: a.Subject, Meta: req.Params.Meta}
	s.mails = append(s.mails, m)
	if s.state != "" {
		st, err := ReadState(s.state)
		if err != nil {
			s.mu.Unlock()
			return nil, Mail{}, err
		}
		st.Mails = append(st.Mails, m)
		crash := st.CrashNext > 0
		if crash {
			st.CrashNext--
		}
		if err := writeState(s.state, st); err != nil {
			s.mu.Unlock()
			return nil, Mail{}, err
		}
		if crash {
			s.exit() // acted, and never answers
		}
	}
	hang := s.hangNext > 0
	if hang {
		s.hangNext--
	}
	s.mu.Unlock()
	if hang {
		select {
		case <-ctx.Done():
		case <-s.release:
		}
		return nil, Mail{}, ctx.Err()
	}
	return nil, m, nil
}

func (s *Server) findMail(_ context.Context, _ *mcp.CallToolRequest, a FindArgs) (*mcp.CallToolResult, Found, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	n := len(s.mails)
	s.mails = nil
	return nil, Count{Count: n}, nil
}

func (s *Server) countMail(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, Count, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// DropAfterActing makes the next n send_mail calls act, then lose their answer (the
// HTTP connection is closed without a response).
func (s *Server) DropAfterActing(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropNext = n
}

// HangAfterActing makes the next n send_mail calls act, then answer only when their
// request is cancelled.
func (s *Server) HangAfterActing(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hangNext = n
}

// Release answers the calls HangAfterActing holds (they answer with an error), and
// any later ones at once.
func (s *Server) Release() {
	s.once.Do(func() { close(s.release) })
}

// FailNext makes the next n send_mail calls answer isError without acting.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorNext = n
}

// MCP returns the SDK server, to serve over any transport (stdio, in memory).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler serves the fake over streamable HTTP, with the drop fault.
func (s *Server) Handler() http.Handler {
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		drop := false
		if msg.Method == "tools/call" && msg.Params.Name == "send_mail" {
			s.mu.Lock()
			if s.dropNext > 0 && s.errorNext == 0 {
				s.dropNext--
				drop = true
			}
			s.mu.Unlock()
		}
		if !drop {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r) // acts, and its answer is thrown away
		panic(http.ErrAbortHandler)
	})
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
