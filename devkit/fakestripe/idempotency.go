package fakestripe

import (
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncebox/oncebox/devkit/fakefault"
)

// idempotencyEntry is what Stripe keeps for one Idempotency-Key.
type idempotencyEntry struct {
	path      string
	paramHash [sha256.Size]byte
	res       result
	requestID string
	// done is false while the first request still runs (a FaultHang); the
	// same key then answers 409.
	done bool
}

// createFunc validates the parameters of a POST. It returns either a function
// that runs the endpoint (with s.mu held) or the validation error, which is
// not stored under the idempotency key.
type createFunc func(form url.Values) (run func() result, err *apiError)

// servePost runs a POST endpoint under Stripe's idempotency rules and the
// injected faults.
func (s *Server) servePost(w http.ResponseWriter, r *http.Request, create createFunc) {
	fault, faulty := s.takeFault(r.URL.Path)
	if faulty {
		switch fault.Kind {
		case FaultDropBeforeCreate:
			s.cfg.Logger.Debug("fakestripe dropped connection before create", slog.String("path", r.URL.Path))
			fakefault.DropConnection(w)
			return
		case Fault429:
			res, retryAfter := rateLimited(fault.RetryAfter)
			w.Header().Set("Retry-After", retryAfter)
			s.writeResult(w, r, res)
			return
		case Fault409:
			s.writeResult(w, r, keyInUse())
			return
		}
	}
	hang := faulty && fault.Kind == FaultHang

	if err := r.ParseForm(); err != nil {
		s.writeResult(w, r, invalidParam("", "", "Invalid request body: "+err.Error()).result())
		return
	}
	form := r.PostForm
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))

	requestID := w.Header().Get("Request-Id")
	res, entry, replayed := s.run(r.URL.Path, key, requestID, form, create, faulty && fault.Kind == FaultStored500, hang)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Original-Request", entry.requestID)
	}

	if hang {
		s.hangs.Hold(r.Context(), s.cfg.HangFor) // until the client goes away or ReleaseHangs
		if entry != nil && !replayed {
			s.mu.Lock()
			entry.done = true
			s.mu.Unlock()
		}
	}
	if faulty && fault.Kind == FaultDropAfterCreate {
		s.cfg.Logger.Debug("fakestripe dropped connection after create", slog.String("path", r.URL.Path))
		fakefault.DropConnection(w)
		return
	}
	s.writeResult(w, r, res)
}

// run decides the answer to a POST with s.mu held: a replay, an idempotency
// error, a validation error, or a new run of the endpoint, stored under key.
// It returns the entry for key, if one was found or stored.
func (s *Server) run(path, key, requestID string, form url.Values, create createFunc, fail500, hang bool) (res result, entry *idempotencyEntry, replayed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	hash := sha256.Sum256([]byte(form.Encode())) // Encode sorts by key.
	if key != "" {
		if e, ok := s.keys[key]; ok {
			switch {
			case !e.done:
				return keyInUse(), nil, false
			case e.path != path:
				return (&apiError{
					status:  http.StatusBadRequest,
					Type:    typeIdempotency,
					Message: "Keys for idempotent requests can only be used for the same endpoint they were first used for ('" + e.path + "' vs '" + path + "'). Try using a key other than '" + key + "' if you meant to execute a different request.",
				}).result(), nil, false
			case e.paramHash != hash:
				return (&apiError{
					status:  http.StatusBadRequest,
					Type:    typeIdempotency,
					Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request.",
				}).result(), nil, false
			}
			return e.res, e, true
		}
	}

	runEndpoint, verr := create(form)
	if verr != nil {
		return verr.result(), nil, false
	}
	if fail500 {
		res = stored500()
	} else {
		res = runEndpoint()
	}
	if key == "" {
		return res, nil, false
	}
	entry = &idempotencyEntry{path: path, paramHash: hash, res: res, requestID: requestID, done: !hang}
	s.keys[key] = entry
	return res, entry, false
}

// ExpireIdempotencyKeys forgets every stored idempotency key, as if 24 hours
// had passed and Stripe had pruned them: a key used again runs anew.
func (s *Server) ExpireIdempotencyKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.keys)
}
