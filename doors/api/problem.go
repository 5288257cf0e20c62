package api

import (
	"encoding/json"
	"net/http"

	"github.com/oncebox/oncebox/protocol"
)

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *protocol.Problem) {
	body, err := json.Marshal(p)
	if err != nil { // Cannot happen: every member is a string, an int or strings.
		body = []byte(`{"type":"` + protocol.ProblemInternal + `","title":"Internal server error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
