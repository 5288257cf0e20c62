package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/internal/storable"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// maxListed bounds the approvals, reviews and search results a page shows.
const maxListed = 200

// notices are the notices a page may show after a form post redirected back to it,
// by the done= the redirect names: the sentence is fixed here, the op it names is the
// one the server finds by key within the signed-in tenant, and it is shown only when
// the op stands where the notice says. Nothing of the URL is shown.
var notices = map[string]struct {
	sentence string
	// holds reports whether an op in this status can be what the notice says.
	holds func(protocol.Status) bool
}{
	"approved": {"Approved: the op %s is on its way to the vendor.", released},
	"voted":    {"Your approval of %s is recorded; it waits for another approver.", is(protocol.StatusAwaitingApproval)},
	"rejected": {"Rejected: the op %s will not be sent.", is(protocol.StatusRejected)},
	"resolved": {"Resolved: the op %s is settled.", is(protocol.StatusSucceeded, protocol.StatusFailed)},
	"resend":   {"Released: the op %s will be sent again.", released},
}

// released reports whether an op in status st has left approval (it may have been
// sent and settled since).
func released(st protocol.Status) bool {
	return st != protocol.StatusAwaitingApproval && st != protocol.StatusRejected
}

// is returns a test for any of the statuses given.
func is(statuses ...protocol.Status) func(protocol.Status) bool {
	return func(st protocol.Status) bool { return slices.Contains(statuses, st) }
}

// notice returns the notice the request's done= and key= ask for, or "" when done= is
// not one of notices, or no op of the signed-in tenant has that key, or the op does
// not stand where the notice says.
func (c *Console) notice(r *http.Request, s *sessionInfo) string {
	q := r.URL.Query()
	n, ok := notices[q.Get("done")]
	key := q.Get("key")
	if !ok || key == "" || len(key) > 255 || storable.CheckText("key", key) != nil {
		return ""
	}
	op, err := c.cfg.Outbox.Get(r.Context(), s.principal.ID, key)
	if err != nil || op == nil || !n.holds(op.Status) {
		return ""
	}
	return fmt.Sprintf(n.sentence, op.Key)
}

// approvalRow is one op of the approvals queue.
type approvalRow struct {
	Key, OpID, Tool, Fingerprint, Why string
	Amount                            string
	Args                              string
	Asker, Conversation, ToolCall     string
	RequestedAt, ExpiresAt            time.Time
	Waited                            string
	Approvals, Needed                 int
}

func (c *Console) approvals(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "approvals")
	v.Title, v.Notice = "Approvals", c.notice(r, s)
	v.OnlyOp = r.URL.Query().Get("op")
	c.fillApprovals(w, r, v, s, http.StatusOK)
}

func (c *Console) fillApprovals(w http.ResponseWriter, r *http.Request, v *view, s *sessionInfo, status int) {
	waiting, err := c.cfg.Outbox.ListWaiting(r.Context(), s.principal.ID, maxListed)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	askers, err := c.askers(r, s)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	now := c.cfg.Now()
	for _, wt := range waiting {
		row := approvalRow{Key: wt.Op.Key, OpID: wt.Op.ID, Tool: wt.Op.Tool, Fingerprint: wt.Op.Fingerprint.String(), Why: wt.Why,
			Args: prettyJSON(wt.Op.Args), Conversation: wt.Op.ConversationID, ToolCall: wt.Op.ToolCallID,
			RequestedAt: wt.RequestedAt, ExpiresAt: wt.ExpiresAt, Waited: since(now, wt.RequestedAt),
			Approvals: wt.Approvals, Needed: wt.ApproversNeeded, Asker: "—"}
		switch {
		case wt.Payment != nil:
			row.Amount = wt.Payment.Describe(wt.Amount, wt.HasAmount)
		case wt.HasAmount:
			row.Amount = money.Format(wt.Amount, wt.Currency)
		}
		if wt.RequestedByToken != 0 {
			row.Asker = cmp.Or(askers[wt.RequestedByToken], fmt.Sprintf("token %d (no longer listed)", wt.RequestedByToken))
		}
		if v.OnlyOp == "" || v.OnlyOp == row.OpID {
			v.Approvals = append(v.Approvals, row)
		}
	}
	if v.OnlyOp != "" && len(v.Approvals) == 0 && v.Notice == "" {
		v.Notice = "This op no longer waits for approval (or is not of your tenant): find it under Lookup by its key."
	}
	c.render(w, r, status, "approvals", v)
}

// askers names the signed-in tenant's tokens by person where a token has one
// ("alice@example.com (agent)"), else by role and id ("agent token 10").
func (c *Console) askers(r *http.Request, s *sessionInfo) (map[int64]string, error) {
	tokens, err := c.cfg.Tenants.Tokens(r.Context(), s.principal.Name)
	if err != nil {
		return nil, fmt.Errorf("console: list tokens: %w", err)
	}
	out := make(map[int64]string, len(tokens))
	for _, t := range tokens {
		out[t.ID] = fmt.Sprintf("%s token %d", t.Role, t.ID)
		if t.Person != "" {
			out[t.ID] = fmt.Sprintf("%s (%s)", t.Person, t.Role)
		}
	}
	return out, nil
}

// decide approves or rejects an op, with the API's own call and rules.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	key, decision := r.PostFormValue("key"), r.PostFormValue("decision")
	if decision != "approve" && decision != "reject" {
		v := c.viewFor(s, "approvals")
		v.Title, v.Error = "Approvals", &refusal{Type: protocol.ProblemInvalidRequest, Sentence: "Choose approve or reject."}
		c.fillApprovals(w, r, v, s, http.StatusBadRequest)
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if decision == "reject" && !c.rejectConfirmed(w, r, s, key, reason) {
		return
	}
	p := s.principal
	res, err := c.cfg.Outbox.Decide(r.Context(), outbox.Decision{TenantID: p.ID, Key: key, Approve: decision == "approve", Actor: p.Actor(),
		Voter: p.Voter(), TokenID: p.TokenID, Role: string(p.Role), Reason: reason,
		Fingerprint: r.PostFormValue("fingerprint")})
	if err != nil {
		v := c.viewFor(s, "approvals")
		v.Title = "Approvals"
		status, ref := opRefusal(err, "Only an op that awaits approval can be approved or rejected, and a decided op only the same way again.")
		if ref == nil {
			c.internal(w, r, v, err)
			return
		}
		v.Error = ref
		c.fillApprovals(w, r, v, s, status)
		return
	}
	done := "rejected"
	if decision == "approve" {
		done = "approved"
		if res.Approvals < res.Needed {
			done = "voted"
		}
	}
	http.Redirect(w, r, "/console/approvals?done="+done+"&key="+queryEscape(res.Op.Key), http.StatusSeeOther)
}

// rejectView is the rejection's confirmation page: the op and the reason given.
type rejectView struct {
	Key, Tool, Fingerprint, Reason string
}

// rejectConfirmed reports whether a rejection may go ahead: it has a reason and was
// confirmed (confirm=yes, the confirmation page's button). Otherwise it answers the
// page itself: the approvals with a refusal when the reason is missing, else the
// confirmation. Both work without JavaScript.
func (c *Console) rejectConfirmed(w http.ResponseWriter, r *http.Request, s *sessionInfo, key, reason string) bool {
	if reason == "" {
		v := c.viewFor(s, "approvals")
		v.Title, v.Error = "Approvals", &refusal{Type: protocol.ProblemInvalidRequest,
			Sentence: "A rejection needs a reason: say why the op must not be sent, for its history."}
		c.fillApprovals(w, r, v, s, http.StatusBadRequest)
		return false
	}
	if r.PostFormValue("confirm") == "yes" {
		return true
	}
	v := c.viewFor(s, "approvals")
	v.Title = "Reject?"
	op, err := c.cfg.Outbox.Get(r.Context(), s.principal.ID, key)
	if err != nil {
		status, ref := opRefusal(err, "")
		if ref == nil {
			c.internal(w, r, v, err)
			return false
		}
		v.Error = ref
		c.fillApprovals(w, r, v, s, status)
		return false
	}
	v.Reject = &rejectView{Key: op.Key, Tool: op.Tool, Fingerprint: r.PostFormValue("fingerprint"), Reason: reason}
	c.render(w, r, http.StatusOK, "reject", v)
	return false
}

// opRefusal maps an error of a person's decision to its status and refusal, the same
// reasons as the API's problem types; nil for an error that is not a refusal.
func opRefusal(err error, wrongState string) (int, *refusal) {
	var (
		keyErr  *protocol.KeyError
		argsErr *vendorapi.ValidationError
	)
	switch {
	case errors.Is(err, outbox.ErrWrongState):
		return http.StatusConflict, &refusal{Type: protocol.ProblemWrongState, Sentence: wrongState}
	case errors.Is(err, outbox.ErrPolicyChanged):
		return http.StatusConflict, &refusal{Type: protocol.ProblemPolicyChanged, Sentence: "The approval policy of this op's tool changed since it started waiting, so this approval is refused; the op keeps waiting (it can be rejected, or left to expire)."}
	case errors.Is(err, outbox.ErrFingerprintMismatch):
		return http.StatusConflict, &refusal{Type: protocol.ProblemFingerprintMismatch, Sentence: "The op stored under this key is not the call this page showed; reload the page."}
	case errors.Is(err, outbox.ErrNotFound):
		return http.StatusNotFound, &refusal{Type: protocol.ProblemNotFound, Sentence: "No op is stored under this idempotency key for your tenant."}
	case errors.As(err, &keyErr):
		return http.StatusBadRequest, &refusal{Type: protocol.ProblemInvalidKey, Sentence: "The idempotency key " + keyErr.Detail + "."}
	case errors.As(err, &argsErr):
		return http.StatusBadRequest, &refusal{Type: protocol.ProblemInvalidRequest, Sentence: fmt.Sprintf("The %s %s.", argsErr.Field, argsErr.Message)}
	}
	return 0, nil
}

// reviewRow is one op in needs_review with its history.
type reviewRow struct {
	outbox.ReviewItem
	// Args are the op's arguments as stored, as the approvals show them (redacted
	// fields stay redacted).
	Args     string
	Amount   string
	Words    reviewWords
	Attempts []attemptRow
	Events   []eventRow
}

// attemptRow is a dispatch attempt for display, its outcome in words.
type attemptRow struct {
	outbox.Attempt
	OutcomeWords string
}

// eventRow is an op event for display: a sentence, its actor named once, the status
// it left the op in, in words; its recorded detail as JSON, shown last.
type eventRow struct {
	outbox.Event
	Sentence, By, Now string
	DetailText        string
}

func eventRows(op *outbox.Op, evs []outbox.Event) []eventRow {
	out := make([]eventRow, 0, len(evs))
	for _, e := range evs {
		out = append(out, eventRow{Event: e, Sentence: DecisionSentence(op, e), By: ActorName(e.Actor),
			Now: StatusWords(e.ToStatus), DetailText: compactJSON(e.Detail)})
	}
	return out
}

// reviewRowFor is the Review item of op, from its history.
func reviewRowFor(reg *outbox.Registry, it outbox.ReviewItem, op *outbox.Op, pay *outbox.Payment, h *outbox.History) reviewRow {
	row := reviewRow{ReviewItem: it, Args: prettyJSON(op.Args), Events: eventRows(op, h.Events)}
	row.Amount, _ = OpMoney(reg, op, pay)
	var last *outbox.Event
	if n := len(h.Events); n > 0 {
		last = &h.Events[n-1]
	}
	row.Words = explainReview(op, last)
	for _, a := range h.Attempts {
		row.Attempts = append(row.Attempts, attemptRow{Attempt: a, OutcomeWords: outcomeWords(a.Outcome)})
	}
	return row
}

func (c *Console) review(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "review")
	v.Title, v.Notice = "Review", c.notice(r, s)
	c.fillReview(w, r, v, s, http.StatusOK)
}

func (c *Console) fillReview(w http.ResponseWriter, r *http.Request, v *view, s *sessionInfo, status int) {
	items, err := c.cfg.Outbox.ListReview(r.Context(), s.principal.ID)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	if len(items) > maxListed {
		items = items[:maxListed]
	}
	for _, it := range items {
		h, err := c.cfg.Outbox.History(r.Context(), s.principal.ID, it.OpID)
		if err != nil {
			c.internal(w, r, v, err)
			return
		}
		op, err := c.cfg.Outbox.Get(r.Context(), s.principal.ID, it.Key)
		if err != nil {
			c.internal(w, r, v, err)
			return
		}
		pay, err := c.cfg.Outbox.PaymentOf(r.Context(), s.principal.ID, op.Tool, op.Args)
		if err != nil {
			c.internal(w, r, v, err)
			return
		}
		v.Reviews = append(v.Reviews, reviewRowFor(c.cfg.Outbox.Tools(), it, op, pay, h))
	}
	c.render(w, r, status, "review", v)
}

// resolve settles an op in needs_review or unknown, with the API's own calls.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	p := s.principal
	key, reason, ref := r.PostFormValue("key"), strings.TrimSpace(r.PostFormValue("reason")), strings.TrimSpace(r.PostFormValue("vendor_ref"))
	v := c.viewFor(s, "review")
	v.Title = "Review"
	bad := func(sentence string) {
		v.Error = &refusal{Type: protocol.ProblemInvalidRequest, Sentence: sentence}
		c.fillReview(w, r, v, s, http.StatusBadRequest)
	}
	if reason == "" {
		bad("A resolution needs a reason: say what was checked, for the op's history.")
		return
	}
	var (
		op   *outbox.Op
		err  error
		done = "resolved"
	)
	switch r.PostFormValue("outcome") {
	case "succeeded":
		if ref == "" {
			bad("Resolving as succeeded needs the vendor reference, the id of the vendor's object.")
			return
		}
		op, err = c.cfg.Outbox.ResolveSucceeded(r.Context(), p.ID, key, ref, reason, p.Actor())
	case "failed":
		op, err = c.cfg.Outbox.ResolveFailed(r.Context(), p.ID, key, reason, p.Actor())
	case "resend":
		done = "resend"
		op, err = c.cfg.Outbox.ReleaseForResend(r.Context(), p.ID, key, reason, p.Actor(), r.PostFormValue("new_key") == "on")
	default:
		bad("Choose an outcome: succeeded, failed or resend.")
		return
	}
	if err != nil {
		wrongState := "Only an op in needs_review or unknown can be resolved by hand."
		if errors.Is(err, outbox.ErrAwaitsApproval) {
			wrongState = outbox.AwaitsApprovalSentence
		}
		status, rf := opRefusal(err, wrongState)
		if rf == nil {
			c.internal(w, r, v, err)
			return
		}
		v.Error = rf
		c.fillReview(w, r, v, s, status)
		return
	}
	http.Redirect(w, r, "/console/review?done="+done+"&key="+queryEscape(op.Key), http.StatusSeeOther)
}

// opView is one op found by a lookup.
type opView struct {
	Op *outbox.Op
	// Status is the op's status in people's words.
	Status   string
	Timeline []TimelineEntry
	// Amount and Args are a money op's amount in words and its arguments as the
	// redaction rules allow (opMoney); "" otherwise.
	Amount, Args string
	// Related is the payment the op is or refunds and every refund made of it.
	Related *relatedView
	// Steps are a composite op's steps, named by the caller's key.
	Steps []stepView
	// ParentKey is, for a step's op, its composite op's key ("" when purged or none).
	ParentKey, ParentID string
}

// stepView is one step of a composite op.
type stepView struct {
	Name, Label, Key, Status, StatusWords string
	HasOp                                 bool
}

// relatedView is what a lookup shows of a payment and its refunds.
type relatedView struct {
	// Payment is the payment op, nil when oncebox did not make it (Ref names it).
	Payment       *outbox.Op
	PaymentAmount string
	Ref           string
	Refunds       []refundRow
	// Summary says how many refunds were made of the payment and how many are done.
	Summary string
}

// refundRow is one refund of a payment.
type refundRow struct {
	Key, Status, StatusWords, VendorRef, Amount string
	CreatedAt                                   time.Time
	// This is the op the lookup is of.
	This bool
}

func (c *Console) lookup(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "lookup")
	v.Title = "Lookup"
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	v.Query = q
	if q == "" {
		c.render(w, r, http.StatusOK, "lookup", v)
		return
	}
	if len(q) > 255 || storable.CheckText("q", q) != nil {
		v.Error = &refusal{Type: protocol.ProblemInvalidRequest, Sentence: "Search for an idempotency key, op id, vendor reference (pi_…, ch_…, re_…) or conversation id (at most 255 characters)."}
		c.render(w, r, http.StatusBadRequest, "lookup", v)
		return
	}
	ops, err := c.cfg.Outbox.Find(r.Context(), s.principal.ID, q, maxListed)
	if err != nil {
		c.internal(w, r, v, fmt.Errorf("console: search ops: %w", err))
		return
	}
	for _, op := range ops {
		ov := opView{Op: op, Status: StatusWords(string(op.Status))}
		if len(ops) == 1 {
			if err := c.fillOp(r, s, &ov); err != nil {
				c.internal(w, r, v, err)
				return
			}
		}
		v.Found = append(v.Found, ov)
	}
	v.Searched = true
	c.render(w, r, http.StatusOK, "lookup", v)
}

// fillOp adds to the lookup of one op its timeline, its amount and arguments, the
// payment and refunds it is part of, and its steps or its parent, by the caller's key.
func (c *Console) fillOp(r *http.Request, s *sessionInfo, ov *opView) error {
	ctx, tid, op, reg := r.Context(), s.principal.ID, ov.Op, c.cfg.Outbox.Tools()
	var err error
	if ov.Timeline, err = c.timeline(r, s, op); err != nil {
		return err
	}
	rel, err := c.cfg.Outbox.Related(ctx, tid, op)
	if err != nil {
		return err
	}
	if rel != nil {
		ov.Related = relatedFor(reg, op, rel)
	}
	pay := RelatedPayment(reg, rel)
	if pay == nil || rel.PaymentRef == "" {
		if pay, err = c.cfg.Outbox.PaymentOf(ctx, tid, op.Tool, op.Args); err != nil {
			return err
		}
	}
	ov.Amount, ov.Args = OpMoney(reg, op, pay)
	for _, st := range op.Steps {
		ov.Steps = append(ov.Steps, stepView{Name: st.Name, Label: stepLabel(op.Key, st.Name), Key: st.Key, Status: st.Status,
			StatusWords: StatusWords(st.Status), HasOp: st.OpID != ""})
	}
	if id := parentOf(op.Key); id != "" {
		ov.ParentID = id
		parents, err := c.cfg.Outbox.Find(ctx, tid, id, 1)
		if err != nil {
			return err
		}
		if len(parents) == 1 {
			ov.ParentKey = parents[0].Key
		}
	}
	return nil
}

// relatedFor is the view of rel for the lookup of op.
func relatedFor(reg *outbox.Registry, op *outbox.Op, rel *outbox.Related) *relatedView {
	rv := &relatedView{Payment: rel.Payment, Ref: rel.PaymentRef}
	if rel.Payment != nil {
		rv.Ref = rel.Payment.VendorRef
		rv.PaymentAmount, _ = OpMoney(reg, rel.Payment, nil)
	}
	done := 0
	for _, rf := range rel.Refunds {
		amount := RefundAmount(reg, rf, rel.Payment)
		if rf.Status == protocol.StatusSucceeded {
			done++
		}
		rv.Refunds = append(rv.Refunds, refundRow{Key: rf.Key, Status: string(rf.Status), StatusWords: StatusWords(string(rf.Status)),
			VendorRef: rf.VendorRef, Amount: amount, CreatedAt: rf.CreatedAt, This: rf.ID == op.ID})
	}
	switch len(rel.Refunds) {
	case 0:
		rv.Summary = "No refund was asked for of this payment."
	case 1:
		rv.Summary = fmt.Sprintf("1 refund was asked for of this payment; %d done.", done)
	default:
		rv.Summary = fmt.Sprintf("%d refunds were asked for of this payment; %d done.", len(rel.Refunds), done)
	}
	return rv
}

// timeline is the op's timeline (Timeline), its vendor events included.
func (c *Console) timeline(r *http.Request, s *sessionInfo, op *outbox.Op) ([]TimelineEntry, error) {
	h, err := c.cfg.Outbox.History(r.Context(), s.principal.ID, op.ID)
	if err != nil {
		return nil, err
	}
	var evs []vendorevents.Event
	if c.cfg.Events != nil {
		if evs, err = c.cfg.Events.ForOp(r.Context(), op.Vendor, op.ID); err != nil {
			return nil, err
		}
	}
	return Timeline(op, h, evs), nil
}

// matchNotes says what differed in a call matched to an op by identity, and where it
// came from.
func matchNotes(m outbox.IdentityMatch) string {
	var parts []string
	switch {
	case m.Differed == nil:
		parts = append(parts, "differed: not known (the op's arguments are redacted)")
	case len(m.Differed) > 0:
		parts = append(parts, "differed: "+strings.Join(m.Differed, ", "))
	}
	if m.ConversationID != "" {
		parts = append(parts, "conversation "+m.ConversationID)
	}
	if m.ToolCallID != "" {
		parts = append(parts, "tool call "+m.ToolCallID)
	}
	parts = append(parts, "payload fingerprint "+m.Fingerprint.String()[:16])
	return strings.Join(parts, " · ")
}

// financeView is the finance page's report.
type financeView struct {
	Since, Until string
	Report       *finance.Report
	// Lines are the report's lines, problems first.
	Lines []finance.Line
	// Unchecked counts the ops of the report that could not be compared.
	Unchecked int
}

// parseWhen reads RFC 3339 or a date (midnight UTC), as `oncebox reconcile report` does.
func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", s)
}

// window reads the finance page's since and until; by default the month so far.
func (c *Console) window(r *http.Request) (time.Time, time.Time, *refusal) {
	now := c.cfg.Now().UTC()
	since := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	until := now.Truncate(time.Second)
	q := r.URL.Query()
	var err error
	if raw := strings.TrimSpace(q.Get("since")); raw != "" {
		if since, err = parseWhen(raw); err != nil {
			return since, until, &refusal{Type: protocol.ProblemInvalidRequest, Sentence: fmt.Sprintf("The start %q is not a date (YYYY-MM-DD) or an RFC 3339 time.", raw)}
		}
	}
	if raw := strings.TrimSpace(q.Get("until")); raw != "" {
		if until, err = parseWhen(raw); err != nil {
			return since, until, &refusal{Type: protocol.ProblemInvalidRequest, Sentence: fmt.Sprintf("The end %q is not a date (YYYY-MM-DD) or an RFC 3339 time.", raw)}
		}
	}
	if err := finance.CheckWindow(since, until, now); err != nil {
		msg := err.Error()
		return since, until, &refusal{Type: protocol.ProblemInvalidRequest, Sentence: strings.ToUpper(msg[:1]) + msg[1:] + "."}
	}
	return since, until, nil
}

func (c *Console) finance(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	v := c.viewFor(s, "finance")
	v.Title = "Finance"
	since, until, bad := c.window(r)
	fv := &financeView{Since: since.UTC().Format(time.RFC3339), Until: until.UTC().Format(time.RFC3339)}
	v.Finance = fv
	if bad != nil {
		fv.Since, fv.Until = r.URL.Query().Get("since"), r.URL.Query().Get("until")
		v.Error = bad
		c.render(w, r, http.StatusBadRequest, "finance", v)
		return
	}
	rep, err := c.cfg.Report(r.Context(), since, until, s.principal.ID)
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	fv.Report = rep
	for _, n := range rep.Unchecked {
		fv.Unchecked += n
	}
	fv.Lines = slices.Clone(rep.Lines)
	slices.SortStableFunc(fv.Lines, func(a, b finance.Line) int {
		return cmp.Compare(boolRank(a.Category == finance.CategoryMatched), boolRank(b.Category == finance.CategoryMatched))
	})
	c.render(w, r, http.StatusOK, "finance", v)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// financeCSV downloads the report's lines as `oncebox reconcile report --format csv`
// writes them, or at finance-totals.csv its totals as `--format totals-csv` does.
func (c *Console) financeCSV(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	since, until, bad := c.window(r)
	if bad != nil {
		c.refuse(w, r, c.viewFor(s, "finance"), http.StatusBadRequest, bad.Type, bad.Sentence)
		return
	}
	rep, err := c.cfg.Report(r.Context(), since, until, s.principal.ID)
	if err != nil {
		c.internal(w, r, c.viewFor(s, "finance"), err)
		return
	}
	var buf bytes.Buffer
	write, name := rep.WriteCSV, "report"
	if strings.HasSuffix(r.URL.Path, "-totals.csv") {
		write, name = rep.WriteTotalsCSV, "totals"
	}
	if err := write(&buf); err != nil {
		c.internal(w, r, c.viewFor(s, "finance"), err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="oncebox-%s-%s-%s.csv"`, name,
		since.UTC().Format("20060102T150405Z"), until.UTC().Format("20060102T150405Z")))
	_, _ = w.Write(buf.Bytes())
}

// prettyJSON indents stored JSON for display.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// compactJSON shows stored JSON on one line; null and empty show nothing.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}
