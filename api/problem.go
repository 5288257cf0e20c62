package api

import (
	"encoding/json"
	"net/http"

	"github.com/oncebox/oncebox/protocol"
)

// problemBase is the prefix of every problem type URL.
const problemBase = protocol.ProblemBase

// problemTitle returns the title of a stable problem slug.
func problemTitle(slug string) string { return protocol.ProblemTitle(problemBase + slug) }

// problem is an RFC 9457 problem document with oncebox's extension members.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`

	// Field is the dotted path of the offending request member, such as "args.amount".
	Field string `json:"field,omitempty"`
	// Rule names the broken rule: an idempotency-key rule (invalid-idempotency-key),
	// or one oncebox sets on a tool's arguments, such as "tag_argument" (invalid-args).
	Rule string `json:"rule,omitempty"`
	// KnownTools lists the tools the server accepts (unknown-tool).
	KnownTools []string `json:"known_tools,omitempty"`
	// StoredFingerprint and GivenFingerprint explain a key-conflict.
	StoredFingerprint string `json:"stored_fingerprint,omitempty"`
	GivenFingerprint  string `json:"given_fingerprint,omitempty"`
	// Status of the op, for wrong-state.
	OpStatus string `json:"op_status,omitempty"`
	// Budget names the budget an op would exceed (budget-exceeded).
	Budget string `json:"budget,omitempty"`
}

// newProblem returns the problem of a slug with its title.
func newProblem(status int, slug, detail string) *problem {
	return &problem{Type: problemBase + slug, Title: problemTitle(slug), Status: status, Detail: detail}
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *problem) {
	body, err := json.Marshal(p)
	if err != nil { // Cannot happen: every member is a string, an int or strings.
		body = []byte(`{"type":"` + problemBase + `internal","title":"Internal server error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
