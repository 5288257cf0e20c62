package fakesendgrid

import (
	"net/http"
	"slices"
	"strings"
)

// Subusers. A request sent with a key given to AddSubuser acts as that subuser: its
// mail is stored apart from the parent's and every other subuser's, and the activity
// endpoints find only its messages. The parent's key with "on-behalf-of: <subuser>"
// acts as the subuser on the activity endpoints; Mail Send does not take on-behalf-of
// (a subuser's mail is sent with its own key), so the fake answers it 400 there rather
// than send from the wrong account. Any other non-empty key is the parent's (the
// Server itself).
//
// Each subuser is a Server of its own: inspect it (Messages, SendCount, ByCustomArg),
// seed it and inject its faults through Subuser. Its events follow the parent's
// SetEvents.

// AddSubuser adds the subuser name whose own API keys are keys, and returns it. Adding
// it again returns the one there is and adds keys to it.
func (s *Server) AddSubuser(name string, keys ...string) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subusers == nil {
		s.subusers = map[string]*Server{}
		s.subuserKeys = map[string]string{}
	}
	u, ok := s.subusers[name]
	if !ok {
		u = New(s.cfg)
		u.subuser = name
		if cfg := s.events.Config(); cfg != nil {
			_ = u.SetEvents(cfg)
		}
		s.subusers[name] = u
	}
	for _, k := range keys {
		s.subuserKeys[k] = name
	}
	return u
}

// Subuser returns the subuser name, nil when it was never added.
func (s *Server) Subuser(name string) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subusers[name]
}

// Subusers returns the names of the subusers, sorted.
func (s *Server) Subusers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.subusers))
	for n := range s.subusers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SubuserName returns the name of the subuser s is ("" for the parent).
func (s *Server) SubuserName() string { return s.subuser }

// route returns the Server a request with key acts as, or false after answering a
// request it refuses.
func (s *Server) route(w http.ResponseWriter, r *http.Request, key string) (*Server, bool) {
	behalf := strings.TrimSpace(r.Header.Get("on-behalf-of"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if name, ok := s.subuserKeys[key]; ok {
		return s.subusers[name], true
	}
	if behalf == "" {
		return s, true
	}
	if r.URL.Path == "/v3/mail/send" {
		writeErrors(w, http.StatusBadRequest, apiError{Message: "on-behalf-of is not supported by the Mail Send API: send with the subuser's own API key"})
		return nil, false
	}
	if u, ok := s.subusers[behalf]; ok {
		return u, true
	}
	writeErrors(w, http.StatusUnauthorized, apiError{Message: "the on-behalf-of subuser does not exist or is not the key's"})
	return nil, false
}

// eachSubuser calls f with every subuser.
func (s *Server) eachSubuser(f func(*Server)) {
	s.mu.Lock()
	users := make([]*Server, 0, len(s.subusers))
	for _, u := range s.subusers {
		users = append(users, u)
	}
	s.mu.Unlock()
	for _, u := range users {
		f(u)
	}
}
