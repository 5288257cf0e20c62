package outbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// approvalEnv is an insert-only Outbox with the money and echo tools.
type approvalEnv struct {
	env
	gov    *governance.Governance
	tenant int64
}

func newApprovalEnv(t *testing.T, policy governance.ApprovalPolicy) approvalEnv {
	t.Helper()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(optest.MoneyTool(), echoTool("echo"))
	require.NoError(t, err)
	gov := newGate(t, pool, reg, policy)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	return approvalEnv{env: env{pool: pool, ob: ob}, gov: gov, tenant: optest.Tenant(t, pool, "acme")}
}

func (e approvalEnv) pay(t *testing.T, key, args string) *outbox.EnqueueResult {
	t.Helper()
	res, err := e.ob.Enqueue(context.Background(), outbox.EnqueueParams{TenantID: e.tenant, Key: key, Tool: "test.money",
		Args: json.RawMessage(args)})
	require.NoError(t, err)
	return res
}

func (e approvalEnv) jobs(t *testing.T, opID string) int {
	t.Helper()
	return dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND args->>'op_id' = $1", opID)
}

func (e approvalEnv) decide(approve bool, key, voter string) (*outbox.DecisionResult, error) {
	return e.ob.Decide(context.Background(), outbox.Decision{TenantID: e.tenant, Key: key, Approve: approve,
		Actor: "person " + voter, Voter: voter, Reason: "checked"})
}

func TestApprovalPolicyPerCurrencyAndTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newApprovalEnv(t, governance.ApprovalPolicy{
		"test.money": {Mode: governance.ApprovalAbove, Above: map[string]int64{"usd": 1000, governance.AnyCurrency: 100}},
	})
	small := e.pay(t, "usd-500", `{"amount": 500, "currency": "usd"}`)
	require.Equal(t, protocol.StatusPending, small.Op.Status, "under the usd threshold")
	big := e.pay(t, "usd-5000", `{"amount": 5000, "currency": "usd"}`)
	require.Equal(t, protocol.StatusAwaitingApproval, big.Op.Status)
	require.Contains(t, big.Why, "A test.money of $50.00 USD is above the approval threshold of $10.00 USD.")
	require.Zero(t, e.jobs(t, big.Op.ID))
	eur := e.pay(t, "eur-500", `{"amount": 500, "currency": "eur"}`)
	require.Equal(t, protocol.StatusAwaitingApproval, eur.Op.Status, "other currencies fall back to *")
	none := e.pay(t, "no-amount", `{}`)
	require.Equal(t, protocol.StatusAwaitingApproval, none.Op.Status, "no amount never skips approval")
	require.Contains(t, none.Why, "without an amount")

	// A tenant's own rule overrides the default for that tenant only.
	_, err := e.gov.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalNever})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, e.pay(t, "usd-9000", `{"amount": 9000, "currency": "usd"}`).Op.Status)
	other := optest.Tenant(t, e.pool, "other")
	res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: other, Key: "usd-9000", Tool: "test.money",
		Args: json.RawMessage(`{"amount": 9000, "currency": "usd"}`)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)

	_, err = e.gov.SetTenantRule(ctx, e.tenant, "test.echo", governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	echo, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: e.tenant, Key: "echo", Tool: "test.echo", Args: json.RawMessage(`{"n": 1}`)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, echo.Op.Status)

	_, err = e.gov.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAbove})
	require.Error(t, err, "above without thresholds")
	_, err = e.gov.SetTenantRule(ctx, e.tenant, "No Such Tool", governance.ApprovalRule{Mode: governance.ApprovalNever})
	require.Error(t, err)
	require.NoError(t, e.gov.ClearTenantRule(ctx, e.tenant, "test.money"))
	require.Equal(t, protocol.StatusAwaitingApproval, e.pay(t, "usd-9001", `{"amount": 9001, "currency": "usd"}`).Op.Status,
		"the default applies again")

	pol, err := e.gov.EffectivePolicy(ctx, e.tenant)
	require.NoError(t, err)
	require.Len(t, pol, 2)
}

// TestApprovalExpires: an op nobody decided in time is rejected with the reason
// "approval expired", seen on the next read and the next replay, and by the sweep.
func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newApprovalEnv(t, governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAlways}})
	read := e.pay(t, "read", `{"amount": 1}`)
	replay := e.pay(t, "replay", `{"amount": 2}`)
	swept := e.pay(t, "swept", `{"amount": 3}`)
	fresh := e.pay(t, "fresh", `{"amount": 4}`)
	var expires time.Time
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT expires_at FROM oncebox_approval WHERE op_id = $1", fresh.Op.ID).Scan(&expires))
	require.WithinDuration(t, time.Now().Add(outbox.DefaultApprovalExpiry), expires, time.Minute, "72 hours by default")
	_, err := e.pool.Exec(ctx, "UPDATE oncebox_approval SET expires_at = now() - interval '1 second' WHERE op_id <> $1", fresh.Op.ID)
	require.NoError(t, err)

	op, err := e.ob.Get(ctx, e.tenant, "read")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusRejected, op.Status)
	require.Contains(t, string(op.Error), "approval expired")
	require.Contains(t, string(op.Error), `"approval_expired"`)
	require.Equal(t, read.Op.ID, op.ID)

	res := e.pay(t, "replay", `{"amount": 2}`)
	require.True(t, res.Replayed)
	require.Equal(t, protocol.StatusRejected, res.Op.Status, "a replay sees the expiry")
	require.Equal(t, replay.Op.ID, res.Op.ID)

	n, err := e.ob.ExpireApprovals(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the sweep expires the op nobody read")
	op, err = e.ob.Get(ctx, e.tenant, "swept")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusRejected, op.Status)
	require.Equal(t, swept.Op.ID, op.ID)

	_, err = e.decide(true, "read", "a")
	require.ErrorIs(t, err, outbox.ErrWrongState, "an expired op cannot be approved")
	require.Zero(t, e.jobs(t, read.Op.ID))
	h, err := e.ob.History(ctx, e.tenant, read.Op.ID)
	require.NoError(t, err)
	require.Len(t, h.Events, 2)
	require.Equal(t, "held", h.Events[0].Kind, "the first status is an event of its own")
	require.Equal(t, "approval_expired", h.Events[1].Kind)

	op, err = e.ob.Get(ctx, e.tenant, "fresh")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, op.Status, "an op within its wait is untouched")
}

// TestApprovalIsBoundToThePolicyVersion: after the tenant's rule changes, an approval
// of an op that waits under the old rule is refused and the op keeps waiting; it can
// still be rejected.
func TestApprovalIsBoundToThePolicyVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newApprovalEnv(t, nil)
	_, err := e.gov.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 100}})
	require.NoError(t, err)
	a := e.pay(t, "a", `{"amount": 500}`)
	b := e.pay(t, "b", `{"amount": 600}`)
	require.Equal(t, protocol.StatusAwaitingApproval, a.Op.Status)

	_, err = e.gov.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 50}})
	require.NoError(t, err)
	_, err = e.decide(true, "a", "p")
	require.ErrorIs(t, err, outbox.ErrPolicyChanged)
	op, err := e.ob.Get(ctx, e.tenant, "a")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, op.Status, "the op keeps waiting")
	require.Zero(t, e.jobs(t, a.Op.ID))
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_approval_vote"))

	res, err := e.decide(false, "a", "p")
	require.NoError(t, err, "a rejection is always safe")
	require.Equal(t, protocol.StatusRejected, res.Op.Status)

	// An op that starts waiting under the new rule can be approved.
	c := e.pay(t, "c", `{"amount": 70}`)
	require.Equal(t, protocol.StatusAwaitingApproval, c.Op.Status)
	res, err = e.decide(true, "c", "p")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, res.Op.Status)
	_ = b
}

// TestFourEyes: a rule with two approvers dispatches the op at its second distinct
// approver; one approver approving twice counts once.
func TestFourEyes(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAlways, Approvers: 2}})
	op := e.pay(t, "big", `{"amount": 1}`).Op

	res, err := e.decide(true, "big", "token:1")
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)
	require.Equal(t, 1, res.Approvals)
	require.Equal(t, 2, res.Needed)

	res, err = e.decide(true, "big", "token:1")
	require.NoError(t, err)
	require.False(t, res.Changed, "the same approver twice is one approval")
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)
	require.Zero(t, e.jobs(t, op.ID))

	res, err = e.decide(true, "big", "token:2")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, res.Op.Status)
	require.Equal(t, 2, res.Approvals)
	require.Equal(t, 1, e.jobs(t, op.ID))

	res, err = e.decide(true, "big", "token:3")
	require.NoError(t, err)
	require.False(t, res.Changed)
	require.Equal(t, 1, e.jobs(t, op.ID))
	_, err = e.decide(false, "big", "token:3")
	require.ErrorIs(t, err, outbox.ErrWrongState)

	// One rejection rejects, even after a first approval.
	e.pay(t, "big2", `{"amount": 2}`)
	_, err = e.decide(true, "big2", "token:1")
	require.NoError(t, err)
	res, err = e.decide(false, "big2", "token:2")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusRejected, res.Op.Status)
}

// TestDecisionIsBoundToTheFingerprint: a decision naming another fingerprint than the
// op's is refused and changes nothing.
func TestDecisionIsBoundToTheFingerprint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newApprovalEnv(t, governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAlways}})
	op := e.pay(t, "k", `{"amount": 1}`).Op
	other := e.pay(t, "other", `{"amount": 2}`).Op
	_, err := e.ob.Decide(ctx, outbox.Decision{TenantID: e.tenant, Key: "k", Approve: true, Actor: "p", Fingerprint: other.Fingerprint.String()})
	require.ErrorIs(t, err, outbox.ErrFingerprintMismatch)
	got, err := e.ob.Get(ctx, e.tenant, "k")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, got.Status)
	res, err := e.ob.Decide(ctx, outbox.Decision{TenantID: e.tenant, Key: "k", Approve: true, Actor: "p", Fingerprint: op.Fingerprint.String()})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, res.Op.Status)
}

// TestEnqueueSeesARuleChangedByAnotherProcess: an enqueue decides under the rule in
// force, never under the one this process read before another process changed it
// (enqueues remember the tenants' rules; the op's insert checks the version).
func TestEnqueueSeesARuleChangedByAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newApprovalEnv(t, nil)
	reg, err := outbox.NewRegistry(optest.MoneyTool(), echoTool("echo"))
	require.NoError(t, err)
	other := newGate(t, e.pool, reg, nil) // another process's
	big := `{"amount": 5000, "currency": "usd"}`

	// No rule, then a rule set elsewhere: the next op waits.
	first := e.pay(t, "before", big)
	require.Equal(t, protocol.StatusPending, first.Op.Status)
	require.Equal(t, 1, e.jobs(t, first.Op.ID))
	_, err = other.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	waits := e.pay(t, "after-set", big)
	require.Equal(t, protocol.StatusAwaitingApproval, waits.Op.Status, "the rule set by another process applies at once")
	require.Zero(t, e.jobs(t, waits.Op.ID))
	pol, err := other.EffectivePolicy(ctx, e.tenant)
	require.NoError(t, err)
	var version string
	for _, r := range pol {
		if r.Tool == "test.money" {
			version = r.Version
		}
	}
	var bound string
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT policy_version FROM oncebox_approval WHERE op_id = $1", waits.Op.ID).Scan(&bound))
	require.Equal(t, version, bound, "the approval is bound to the version in force")

	// Changed again elsewhere (to a threshold), then cleared elsewhere.
	_, err = other.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 10000}})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusPending, e.pay(t, "after-raise", big).Op.Status)
	_, err = other.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 100}})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, e.pay(t, "after-lower", big).Op.Status)
	require.NoError(t, other.ClearTenantRule(ctx, e.tenant, "test.money"))
	require.Equal(t, protocol.StatusPending, e.pay(t, "after-clear", big).Op.Status)

	// Inside the caller's transaction too, and a replay under a changed rule stays a
	// replay of the op as it was recorded.
	_, err = other.SetTenantRule(ctx, e.tenant, "test.money", governance.ApprovalRule{Mode: governance.ApprovalAlways})
	require.NoError(t, err)
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	inTx, err := e.ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{TenantID: e.tenant, Key: "in-tx", Tool: "test.money", Args: json.RawMessage(big)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, inTx.Op.Status)
	require.NoError(t, tx.Commit(ctx))
	replay := e.pay(t, "before", big)
	require.True(t, replay.Replayed)
	require.Equal(t, first.Op.ID, replay.Op.ID)
	require.Equal(t, 1, e.jobs(t, first.Op.ID))
}
