package fakewebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Effect is one side effect the receiver performed: one accepted POST that was
// neither a replay nor refused before the effect.
type Effect struct {
	// ID is the effect's id, answered as "id" and X-Request-Id.
	ID string `json:"id"`
	// OpID is the request's Oncebox-Op header.
	OpID string `json:"op_id"`
	// Key is the request's Idempotency-Key header.
	Key string `json:"key"`
	// Path is the request's URL path.
	Path string `json:"path"`
	// Body is the request's JSON body.
	Body json.RawMessage `json:"body"`
	// Headers are the request's headers, secrets included.
	Headers http.Header `json:"headers"`
	// At is when the effect was recorded, by Config.Now.
	At time.Time `json:"at"`
}

// Effects returns every effect performed so far, oldest first.
func (s *Server) Effects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.effects)
}

// EffectCount returns how many effects were performed.
func (s *Server) EffectCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.effects)
}

// EffectsFor returns the effects whose Oncebox-Op header was opID, oldest
// first.
func (s *Server) EffectsFor(opID string) []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Effect
	for _, e := range s.effects {
		if e.OpID == opID {
			out = append(out, e)
		}
	}
	return out
}

// lookupObject is one entry of GET /_lookup: the effect's id, when it was made, and
// the answer its call got (status and body), so that an op settled from the lookup
// keeps the result a dispatch would have stored.
type lookupObject struct {
	ID      string          `json:"id"`
	Created string          `json:"created"`
	Status  int             `json:"status"`
	Body    json.RawMessage `json:"body"`
}

func (s *Server) serveLookup(w http.ResponseWriter, r *http.Request) {
	opID := r.URL.Query().Get("oncebox_op")
	if opID == "" {
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":"oncebox_op is required"}`))
		return
	}
	s.mu.Lock()
	visibleBefore := s.cfg.Now().Add(-s.cfg.LookupLag)
	objects := []lookupObject{}
	for _, e := range s.effects {
		if e.OpID == opID && !e.At.After(visibleBefore) {
			objects = append(objects, lookupObject{ID: e.ID, Created: e.At.UTC().Format(time.RFC3339Nano),
				Status: http.StatusOK, Body: okAnswer(e.ID)})
		}
	}
	s.mu.Unlock()
	body, err := json.Marshal(map[string]any{"objects": objects})
	if err != nil {
		panic("fakewebhook: encode lookup: " + err.Error())
	}
	writeJSON(w, http.StatusOK, body)
}

// effectsPage is the body of GET /_effects.
type effectsPage struct {
	Effects []Effect `json:"effects"`
}

func (s *Server) serveEffects(w http.ResponseWriter) {
	page := effectsPage{Effects: s.Effects()}
	if page.Effects == nil {
		page.Effects = []Effect{}
	}
	body, err := json.Marshal(page)
	if err != nil {
		panic("fakewebhook: encode effects: " + err.Error())
	}
	writeJSON(w, http.StatusOK, body)
}

// FetchEffects asks the fake served at baseURL for its effects through
// GET /_effects, for tests whose fake runs in another process. A nil client
// means http.DefaultClient.
func FetchEffects(ctx context.Context, client *http.Client, baseURL string) ([]Effect, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/_effects", nil)
	if err != nil {
		return nil, fmt.Errorf("fetch effects: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch effects: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("fetch effects: HTTP %d", resp.StatusCode)
	}
	var page effectsPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, fmt.Errorf("fetch effects: decode: %w", err)
	}
	return page.Effects, nil
}
