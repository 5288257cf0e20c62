package audit

import (
	"context"
	"encoding/json"
	"fmt"
)

// CheckOps is the chaos harness's check of the audit log (make chaos, after kills and a
// Postgres crash): each op of want (op id to its status as oncebox stored it, "" for
// an op purged since) has exactly one call entry, first among its entries; no status
// entry repeats the status before it (a change recorded twice), but pending after
// pending with more attempts (a dispatch cut back to pending: its claim in between is
// not recorded); its last status is the op's; and tenant's sealed chain verifies. It
// returns one sentence per problem.
func CheckOps(ctx context.Context, q Querier, tenant int64, want map[string]string) ([]string, error) {
	entries, err := readChain(ctx, q, tenant)
	if err != nil {
		return nil, err
	}
	byOp := map[string][]*Entry{}
	for _, e := range entries {
		if e.OpID != "" {
			byOp[e.OpID] = append(byOp[e.OpID], e)
		}
	}
	var problems []string
	for id, status := range want {
		problems = append(problems, checkOp(id, status, byOp[id])...)
	}
	r, err := verifyChain(ctx, q, tenant, nil, entries)
	if err != nil {
		return nil, err
	}
	if r.Mismatch != nil {
		problems = append(problems, "the chain does not verify: "+r.Mismatch.Error())
	}
	return problems, nil
}

// checkOp checks one op's entries, in chain order, against its stored status.
func checkOp(id, status string, entries []*Entry) []string {
	if len(entries) == 0 || entries[0].Kind != "call" {
		return []string{fmt.Sprintf("op %s: its audit entries do not start with its call", id)}
	}
	var problems []string
	var f struct {
		To       string `json:"to"`
		Held     string `json:"held"`
		Attempts int    `json:"attempts"`
	}
	if err := json.Unmarshal(entries[0].Fields, &f); err != nil {
		return []string{fmt.Sprintf("op %s: call entry: %v", id, err)}
	}
	last, attempts := "pending", 0
	if f.Held != "" {
		last = f.Held
	}
	for _, e := range entries[1:] {
		switch e.Kind {
		case "call":
			problems = append(problems, fmt.Sprintf("op %s: a second call entry (seq %d)", id, e.Seq))
		case "status":
			f.To, f.Attempts = "", 0
			if err := json.Unmarshal(e.Fields, &f); err != nil {
				return append(problems, fmt.Sprintf("op %s: entry seq %d: %v", id, e.Seq, err))
			}
			// pending, then pending with more attempts: a claim (pending to dispatching,
			// not recorded, one attempt more) was cut back to pending (retryable).
			retried := f.To == "pending" && f.Attempts > attempts
			if f.To == last && !retried {
				problems = append(problems, fmt.Sprintf("op %s: entry seq %d records %s again", id, e.Seq, f.To))
			}
			last, attempts = f.To, f.Attempts
		}
	}
	if status != "" && status != "dispatching" && last != status {
		problems = append(problems, fmt.Sprintf("op %s is %s but its audit log ends at %s", id, status, last))
	}
	return problems
}
