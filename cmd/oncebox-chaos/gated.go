package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hostile upstream: the HTTP fake MCP upstream also offers wipe_mailbox
// (destructiveHint, and approval: {mode: always} in the file), the gated tool. A share
// of the workload calls it; the harness approves some of those ops through the API with
// an approver token, rejects others and leaves the rest waiting. Partway through the
// chaos the fake lists wipe_mailbox again as readOnlyHint (notifications/tools/
// list_changed): a serve process that listed it before refuses the loosening (an ERROR
// line per tool), one started after takes the file's approval rule (at least write,
// gated). Meanwhile the fake answers every gatedGarbageEvery-th wipe_mailbox, every
// mailGarbageEvery-th send_mail and every lookupGarbageEvery-th lookup (find_mail,
// find_wipe) with truncated JSON, each held until another call is in flight on the
// same session (up to a second). The verdict: no wipe but for an op the harness
// approved, one per such op; no gated call answered other than awaiting_approval; no
// op taken down by another call's garbage.

// Decisions the harness makes on a gated op.
const (
	decisionApprove = "approve"
	decisionReject  = "reject"
)

// The garbage: every nth call of the tool is answered with truncated JSON while the
// chaos lasts; the lookups' garbage fails a lookup, which the reconciler makes again.
const (
	gatedGarbageEvery  = 3
	mailGarbageEvery   = 12
	lookupGarbageEvery = 4
)

// loosenedLine is what a serve process logs when it refuses to loosen a tool.
const loosenedLine = "refused, it keeps its definition in force"

// brokenSessionLine is what a serve process logs when the HTTP upstream's session
// ended; decodeFailures are what the SDK's client says when it ends one on an answer
// it could not read (garbage, an SSE event past its size or malformed, a type it does
// not take).
const brokenSessionLine = `msg="upstream session ended; opening it again" upstream=` + mcpUpstream + " "

var decodeFailures = [][]byte{[]byte("failed to decode response"), []byte("failed to decode event"), []byte("malformed event"),
	[]byte("unsupported content type")}

// gate is the hostile upstream's state in a run.
type gate struct {
	// relists counts the times the fake listed the gated tool read-only; relistAt is
	// when it first did (the history's clock; 0: not yet).
	relists  atomic.Int64
	relistAt atomic.Int64
}

// drawDecision draws what the harness does with a gated op: approve half, reject a
// quarter, leave a quarter waiting.
func drawDecision(rng *rand.Rand) string {
	switch u := rng.Float64(); {
	case u < 0.5:
		return decisionApprove
	case u < 0.75:
		return decisionReject
	}
	return ""
}

// gatedOn reports whether the run has the hostile upstream (make chaos): not in a
// rolling upgrade, whose first processes run a release without its defences, nor in a
// failover run: an asynchronous one loses op rows by design (an approval of a gated op
// the fork lost answers 404, which the harness cannot tell from a broken gate), and a
// run of 400 ops is too short to be sure garbage lands among calls in flight.
func (h *harness) gatedOn() bool { return h.cfg.UpgradeFrom == "" && h.cfg.Failover == "" }

// gatedCatalog is the gated tool's entry in the HTTP upstream's tools, or "".
func (h *harness) gatedCatalog() string {
	if !h.gatedOn() {
		return ""
	}
	return "      wipe_mailbox: {tag_argument: ref, lookup_tool: find_wipe, lookup_argument: ref, approval: {mode: always}}\n"
}

// prepareGated creates the approver token of tenant and makes the fake offer the gated
// tool and answer calls with garbage.
func (h *harness) prepareGated(ctx context.Context, tenant string) error {
	if !h.gatedOn() {
		return nil
	}
	out, err := h.oncebox(ctx, "tenant", "--database-url", h.dbURL, "--role", "approver", "--person", "approver@chaos.example",
		"token", "create", tenant)
	if err != nil {
		return fmt.Errorf("oncebox tenant token create --role approver: %w\n%s", err, out)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) == 0 {
		return fmt.Errorf("oncebox tenant token create --role approver printed no token")
	}
	h.approver = lines[len(lines)-1]
	h.fakes.mcp.OfferWipe()
	// A garbled answer waits up to a second (half the call timeout) for another call in
	// flight on its session: garbage lands among other calls, not between them.
	h.fakes.mcp.SetGarbageHold(time.Second)
	h.fakes.mcp.SetGarbageTypes(hostileTypes...) // spelled oddly (hostile.go)
	h.garbage(true)
	return nil
}

// garbage turns the fake's garbage answers on or off.
func (h *harness) garbage(on bool) {
	if !h.gatedOn() {
		return
	}
	g, m, l := gatedGarbageEvery, mailGarbageEvery, lookupGarbageEvery
	if !on {
		g, m, l = 0, 0, 0
	}
	h.fakes.mcp.GarbageEvery("wipe_mailbox", g)
	h.fakes.mcp.GarbageEvery("send_mail", m)
	h.fakes.mcp.GarbageEvery("find_mail", l)
	h.fakes.mcp.GarbageEvery("find_wipe", l)
}

// relistLoop lists the gated tool again as read-only two fifths into the chaos. A
// serve process started since lists it so from the start (the file's approval rule
// keeps it gated), so only one that listed it destructive before can refuse the
// loosening: while no serve process has logged a refusal (none was up to hear it, or
// the one that was got killed first), the upstream lists it destructive again (every
// process tightens it to unsafe) and, 4 s later, read-only again, at most three times.
func (h *harness) relistLoop(ctx context.Context) {
	if !h.gatedOn() {
		return
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	if !sleep(h.cfg.EnqueueFor * 2 / 5) {
		return
	}
	for try := range 3 {
		if try > 0 {
			if !sleep(8*time.Second) || h.loosenings() > 0 {
				return
			}
			h.fakes.mcp.Reannotate("wipe_mailbox", fakemcpWipeAnnotations())
			if !sleep(4 * time.Second) {
				return
			}
		}
		h.fakes.mcp.Reannotate("wipe_mailbox", &mcp.ToolAnnotations{ReadOnlyHint: true})
		h.gate.relistAt.CompareAndSwap(0, h.history.now())
		h.gate.relists.Add(1)
		h.logger.Info("the upstream lists its gated tool as read-only now", slog.String("tool", toolGated))
	}
}

// fakemcpWipeAnnotations are wipe_mailbox's annotations as the fake first lists it.
func fakemcpWipeAnnotations() *mcp.ToolAnnotations {
	t := true
	return &mcp.ToolAnnotations{DestructiveHint: &t}
}

// loosenings counts the loosenings the serve processes refused, from their logs.
func (h *harness) loosenings() int {
	return h.logLines(func(line []byte) bool { return bytes.Contains(line, []byte(loosenedLine)) })
}

// brokenSessions counts, in the serve logs, the HTTP upstream's sessions that ended on
// an answer the SDK's client could not decode.
func (h *harness) brokenSessions() int {
	return h.logLines(func(line []byte) bool {
		if !bytes.Contains(line, []byte(brokenSessionLine)) {
			return false
		}
		for _, f := range decodeFailures {
			if bytes.Contains(line, f) {
				return true
			}
		}
		return false
	})
}

// logLines counts the lines of the serve logs that match.
func (h *harness) logLines(match func(line []byte) bool) int {
	files, _ := filepath.Glob(filepath.Join(h.logDir, "*.log"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range bytes.Lines(b) {
			if match(line) {
				n++
			}
		}
	}
	return n
}

// gate checks the answers a gated key got (all copies, before any decision), then
// makes the decision the plan draws, a moment later.
func (c *client) gate(ctx context.Context, start int, it item, results []sendResult, out *outcome) {
	for _, res := range results {
		if res.status != http.StatusAccepted && res.status != http.StatusOK {
			continue
		}
		if a := answerOf(res.status, res.body); a.Status != statusAwaiting {
			out.ungated = append(out.ungated, a.Status)
		}
	}
	if !out.accepted || it.plan.Decision == "" {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(100+rand.IntN(1500)) * time.Millisecond):
	}
	if err := c.decide(ctx, start, it.key, it.plan.Decision); err != nil {
		out.err = fmt.Errorf("key %s: %s: %w", it.key, it.plan.Decision, err)
		return
	}
	out.decided = it.plan.Decision
}

// decide approves or rejects the op of key with the approver token, retrying a
// transport error or a 5xx on the next process. A 409 wrong-state showing the op past
// the decision (a retry of a decision whose answer was lost) is the decision made.
func (c *client) decide(ctx context.Context, start int, key, decision string) error {
	deadline := time.Now().Add(c.giveUp)
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		status, body, err := c.decideOnce(ctx, c.bases[(start+attempt)%len(c.bases)], key, decision)
		if err == nil {
			var p struct {
				OpStatus string `json:"op_status"`
			}
			_ = json.Unmarshal(body, &p)
			switch {
			case status == http.StatusOK:
				return nil
			case status == http.StatusConflict && decision == decisionReject && p.OpStatus == statusRejected,
				status == http.StatusConflict && decision == decisionApprove && p.OpStatus != "" && p.OpStatus != statusAwaiting && p.OpStatus != statusRejected:
				return nil
			case status < 500:
				return fmt.Errorf("HTTP %d: %s", status, body)
			}
			err = fmt.Errorf("HTTP %d: %s", status, body)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s: %w", c.giveUp, err)
		}
		c.retries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (c *client) decideOnce(ctx context.Context, base, key, decision string) (int, []byte, error) {
	c.requests.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/ops/"+key+"/"+decision,
		strings.NewReader(`{"reason":"chaos"}`))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.approver)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// qMalformed counts, by op, the attempts recorded as answered with something that is
// no JSON-RPC message (catalog's malformed_answer).
const qMalformed = `SELECT a.op_id::text, count(*) FROM oncebox_attempt a JOIN oncebox_op o ON o.id = a.op_id
  WHERE o.tenant_id = ANY($1) AND a.error LIKE '%no JSON-RPC message%' GROUP BY a.op_id`

// gatedInput fills what the verdict needs of the hostile upstream, and returns the
// harness errors of a run that did not prove it.
func (h *harness) gatedInput(ctx context.Context, in *CheckInput, outcomes []outcome) ([]string, error) {
	in.Approved, in.Rejected, in.Ungated = map[string]bool{}, map[string]bool{}, map[string][]string{}
	in.Garbled, in.Malformed = map[string]int{}, map[string]int{}
	if !h.gatedOn() {
		return nil, nil
	}
	for _, o := range outcomes {
		if o.tool != toolGated {
			continue
		}
		switch {
		case o.decided == decisionApprove:
			in.Approved[o.key] = true
		case o.decided == decisionReject:
			in.Rejected[o.key] = true
		case o.plan.Decision == decisionApprove:
			// Its approval may have been made without its answer: not a run to blame.
			in.Approved[o.key] = true
		}
		if len(o.ungated) > 0 {
			in.Ungated[o.key] = o.ungated
		}
	}
	in.BrokenSessions = h.brokenSessions()
	for _, g := range h.fakes.mcp.GarbledCalls() {
		in.GarbageSeen = true
		switch {
		case g.OpID != "":
			in.Garbled[g.OpID]++
		case g.Ref != "":
			in.Garbled[g.Ref]++ // a lookup of the op
		}
	}
	rows, err := h.pool.Query(ctx, qMalformed, h.tenantIDs())
	if err != nil {
		return nil, fmt.Errorf("read the malformed answers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			n  int
		)
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("read the malformed answers: %w", err)
		}
		in.Malformed[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the malformed answers: %w", err)
	}

	f := h.gatedFigures(outcomes, in.Objects)
	var errs []string
	if f.afterRelist == 0 {
		errs = append(errs, "no gated op was sent after the upstream listed the gated tool read-only: the relist went unproven")
	}
	if f.loosenings == 0 {
		errs = append(errs, "no serve process refused to loosen the gated tool: the relist went unheard")
	}
	if f.approved == 0 || f.unapproved == 0 {
		errs = append(errs, "the run approved no gated op, or left none unapproved: the gate went unproven")
	}
	if f.concurrent == 0 {
		errs = append(errs, "the upstream garbled no answer while another call was in flight on its session: the garbage went unproven")
	}
	return errs, nil
}

// gatedFigures are the hostile upstream's figures of a run.
type gatedFigures struct {
	ops, approved, rejected, unapproved, afterRelist int
	runs, loosenings, relists, garbage, concurrent   int
	brokenSessions                                   int
}

func (h *harness) gatedFigures(outcomes []outcome, objects []VendorObject) gatedFigures {
	var f gatedFigures
	if !h.gatedOn() {
		return f
	}
	relistAt := h.gate.relistAt.Load()
	for _, o := range outcomes {
		if o.tool != toolGated || !o.accepted {
			continue
		}
		f.ops++
		switch o.decided {
		case decisionApprove:
			f.approved++
		case decisionReject:
			f.rejected++
			f.unapproved++
		default:
			f.unapproved++
		}
		if relistAt != 0 && o.sentAt > relistAt {
			f.afterRelist++
		}
	}
	for _, obj := range objects {
		if obj.Kind == kindMCPWipe {
			f.runs++
		}
	}
	f.loosenings, f.relists, f.brokenSessions = h.loosenings(), int(h.gate.relists.Load()), h.brokenSessions()
	for _, g := range h.fakes.mcp.GarbledCalls() {
		f.garbage++
		if g.Concurrent > 0 {
			f.concurrent++
		}
	}
	return f
}

func (f gatedFigures) String() string {
	return fmt.Sprintf("gated_ops=%d gated_approved=%d gated_rejected=%d gated_waiting=%d gated_after_relist=%d gated_runs=%d"+
		" relists=%d loosenings_refused=%d garbage=%d garbage_concurrent=%d sessions_broken=%d",
		f.ops, f.approved, f.rejected, f.unapproved-f.rejected, f.afterRelist, f.runs, f.relists, f.loosenings, f.garbage, f.concurrent,
		f.brokenSessions)
}
