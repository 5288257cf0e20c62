package fakemcp

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
)

// Answer is how Handler answers one call in place of the SDK's answer (AnswerNext): a
// hostile upstream's answer, headers and all.
type Answer struct {
	// ContentType is the Content-Type header as written, odd spelling and all
	// ("Application/JSON", "Text/Event-Stream; charset=UTF-8"); an SSE type (read as
	// mime.ParseMediaType reads it) frames the body as one event. "" writes
	// application/json.
	ContentType string
	// Garbage makes the body "garbage{": no JSON-RPC message.
	Garbage bool
	// Size, without Garbage, is the length of the result's text: Size bytes of "x",
	// streamed as they are written, never held whole in memory.
	Size int64
}

// AnswerNext makes the next call of tool over HTTP (Handler) run, then be answered
// with a instead of its result. Answered counts the calls so answered.
func (s *Server) AnswerNext(tool string, a Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answers == nil {
		s.answers = map[string][]Answer{}
	}
	s.answers[tool] = append(s.answers[tool], a)
}

// Answered counts the calls answered as AnswerNext asked.
func (s *Server) Answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered
}

// SetGarbageTypes makes the garbled answers (GarbageNext, GarbageEvery) go out with
// these Content-Type headers in turn, spelled as given (an SSE type frames the
// truncated JSON as one event); none: application/json.
func (s *Server) SetGarbageTypes(types ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.garbageTypes = append([]string(nil), types...)
}

// nextAnswer pops the answer due for a call of tool, if any. Called with mu held.
func (s *Server) nextAnswer(tool string) (Answer, bool) {
	q := s.answers[tool]
	if len(q) == 0 {
		return Answer{}, false
	}
	s.answers[tool] = q[1:]
	s.answered++
	return q[0], true
}

// garbageType is the Content-Type of the next garbled answer. Called with mu held.
func (s *Server) garbageType() string {
	if len(s.garbageTypes) == 0 {
		return "application/json"
	}
	ct := s.garbageTypes[s.garbageTurn%len(s.garbageTypes)]
	s.garbageTurn++
	return ct
}

// isSSE reports whether the Content-Type ct is text/event-stream, read as the SDK's
// client reads it.
func isSSE(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// writeBody writes body with the Content-Type ct, framed as one SSE event when ct is
// SSE.
func writeBody(w http.ResponseWriter, ct string, body []byte) {
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	if isSSE(ct) {
		body = append(append([]byte("event: message\ndata: "), body...), "\n\n"...)
	}
	_, _ = w.Write(body)
}

// writeAnswer writes a as the answer of the call id.
func writeAnswer(w http.ResponseWriter, id json.RawMessage, a Answer) {
	ct := a.ContentType
	if ct == "" {
		ct = "application/json"
	}
	if a.Garbage {
		writeBody(w, ct, []byte("garbage{"))
		return
	}
	sse := isSSE(ct)
	w.Header().Set("Content-Type", ct)
	if !sse {
		w.Header().Set("Content-Length", strconv.FormatInt(int64(len(`{"jsonrpc":"2.0","id":,"result":{"content":[{"type":"text","text":""}]}}`)+len(id))+a.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if sse {
		_, _ = w.Write([]byte("event: message\ndata: "))
	}
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`))
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for left := a.Size; left > 0; left -= int64(len(chunk)) {
		if _, err := w.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			return // the client stopped reading
		}
	}
	_, _ = w.Write([]byte(`"}]}}`))
	if sse {
		_, _ = w.Write([]byte("\n\n"))
	}
}
