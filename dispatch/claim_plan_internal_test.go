package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
)

// TestPlanClaim tables how a claiming job claims with the op it locked, without
// Postgres or a vendor: first from what the locking read found, then, for a plan
// that sends only inside the vendor key's window, once that window is known.
func TestPlanClaim(t *testing.T) {
	t.Parallel()
	type want struct {
		step         claimStep
		snooze       time.Duration
		kind         string
		insideWindow bool
	}
	for _, tc := range []struct {
		name string
		in   claimFound
		want want
	}{
		{"pending, clean", claimFound{status: protocol.StatusPending, clean: true},
			want{step: claimSend}},
		{"pending, clean, resend window passed", claimFound{status: protocol.StatusPending, clean: true, resendPassed: true},
			want{step: claimHandOver, kind: kindResendWindowPassed}},
		{"pending, unclean, resend window passed", claimFound{status: protocol.StatusPending, resendPassed: true},
			want{step: claimHandOver, kind: kindResendWindowPassed}},
		{"pending, unclean", claimFound{status: protocol.StatusPending},
			want{step: claimMarkUnheard, kind: kindPredecessorUnheard}},
		{"pending, clean, mayRun ignored", claimFound{status: protocol.StatusPending, clean: true, mayRunSecs: 5},
			want{step: claimSend}},
		{"dispatching, attempt may still run", claimFound{status: protocol.StatusDispatching, mayRunSecs: 2.5},
			want{step: claimSnooze, snooze: 2500*time.Millisecond + takeoverMargin}},
		{"dispatching, attempt over", claimFound{status: protocol.StatusDispatching},
			want{step: claimCloseLost, kind: kindPredecessorLost}},
		{"dispatching, attempt over long ago", claimFound{status: protocol.StatusDispatching, mayRunSecs: -30, clean: true},
			want{step: claimCloseLost, kind: kindPredecessorLost}},
		{"awaiting approval", claimFound{status: protocol.StatusAwaitingApproval, clean: true},
			want{step: claimComplete}},
		{"unknown (the reconciler owns it)", claimFound{status: protocol.StatusUnknown},
			want{step: claimComplete}},
		{"needs review", claimFound{status: protocol.StatusNeedsReview, resendPassed: true},
			want{step: claimComplete}},
		{"succeeded", claimFound{status: protocol.StatusSucceeded, mayRunSecs: 3},
			want{step: claimComplete}},
		{"failed", claimFound{status: protocol.StatusFailed}, want{step: claimComplete}},
		{"rejected", claimFound{status: protocol.StatusRejected}, want{step: claimComplete}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planClaim(tc.in)
			require.Equal(t, tc.want, want{step: plan.step, snooze: plan.snooze, kind: plan.kind, insideWindow: plan.insideWindow})
			if plan.step == claimHandOver || plan.step == claimMarkUnheard || plan.step == claimCloseLost {
				require.NotEmpty(t, plan.reason, "a hand-over says why")
			}
		})
	}
}

// TestClaimPlanWindow tables a plan that sends only inside the vendor key's
// window, once the window is known: inside it the job sends and stays inside it;
// outside it the op goes to the reconciler with the plan's event.
func TestClaimPlanWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   claimFound
		open bool
		want claimPlan
	}{
		{"unheard predecessor, window open", claimFound{status: protocol.StatusPending}, true,
			claimPlan{step: claimSend, insideWindow: true}},
		{"unheard predecessor, window closed", claimFound{status: protocol.StatusPending}, false,
			claimPlan{step: claimHandOver, kind: kindPredecessorUnheard, reason: planClaim(claimFound{status: protocol.StatusPending}).reason}},
		{"lost predecessor, window open", claimFound{status: protocol.StatusDispatching}, true,
			claimPlan{step: claimSend, insideWindow: true}},
		{"lost predecessor, window closed", claimFound{status: protocol.StatusDispatching}, false,
			claimPlan{step: claimHandOver, kind: kindPredecessorLost, reason: planClaim(claimFound{status: protocol.StatusDispatching}).reason}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, planClaim(tc.in).window(tc.open))
		})
	}
}
