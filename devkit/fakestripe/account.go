package fakestripe

import (
	"net/http"
	"slices"
	"strings"
)

// Connected accounts (Stripe Connect). A request with the header
// "Stripe-Account: acct_…" acts on that account: it creates, reads, lists and searches
// only that account's objects, and its idempotency keys are that account's. A request
// sent with a key given to AddAccount acts on its account too, as a connected
// account's own secret key does. A request without either is the platform's (the
// Server itself). An account never added answers 403 account_invalid, as Stripe does
// for an account not connected to the platform.
//
// Each account is a Server of its own: inspect it (PaymentIntents, ByTag, Requests,
// CreatedCount), seed it and inject its faults through Account. Its events carry
// "account": its id, as Connect events do, and follow the platform's SetEvents.

// AddAccount connects the account id (such as "acct_A") to the platform and returns it;
// keys are secret keys of the account's own that act on it without the header. Adding
// an account again returns the one there is and adds keys to it.
func (s *Server) AddAccount(id string, keys ...string) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addAccountLocked(id, keys...)
}

// addAccountLocked is AddAccount with s.mu held.
func (s *Server) addAccountLocked(id string, keys ...string) *Server {
	if s.accounts == nil {
		s.accounts = map[string]*Server{}
		s.accountKeys = map[string]string{}
	}
	a, ok := s.accounts[id]
	if !ok {
		a = New(s.cfg)
		a.account = id
		if cfg := s.events.Config(); cfg != nil {
			_ = a.SetEvents(cfg)
		}
		s.accounts[id] = a
	}
	for _, k := range keys {
		s.accountKeys[k] = id
	}
	return a
}

// Account returns the connected account id, nil when it was never added.
func (s *Server) Account(id string) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accounts[id]
}

// Accounts returns the ids of the connected accounts, sorted.
func (s *Server) Accounts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.accounts))
	for id := range s.accounts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// AccountID returns the id of the account s is ("" for the platform).
func (s *Server) AccountID() string { return s.account }

// route returns the Server whose objects r acts on, or the error of an account the
// platform does not know.
func (s *Server) route(r *http.Request) (*Server, *apiError) {
	id := strings.TrimSpace(r.Header.Get("Stripe-Account"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if id = s.accountKeys[strings.TrimSpace(token)]; id == "" {
			return s, nil
		}
	}
	if a, ok := s.accounts[id]; ok {
		return a, nil
	}
	if s.cfg.AnyAccount && strings.HasPrefix(id, "acct_") {
		return s.addAccountLocked(id), nil
	}
	return nil, &apiError{status: http.StatusForbidden, Type: typeInvalidRequest, Code: "account_invalid",
		Message: "The provided key does not have access to account '" + id + "' (or that account does not exist). Application access may have been revoked."}
}

// eachAccount calls f with every connected account.
func (s *Server) eachAccount(f func(*Server)) {
	s.mu.Lock()
	accounts := make([]*Server, 0, len(s.accounts))
	for _, a := range s.accounts {
		accounts = append(accounts, a)
	}
	s.mu.Unlock()
	for _, a := range accounts {
		f(a)
	}
}
