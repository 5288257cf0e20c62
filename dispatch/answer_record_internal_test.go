package dispatch

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestRecordOf tables what is recorded of a dispatch's answer: the mapping of it to the op's next status, without
// Postgres or a vendor.
func TestRecordOf(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	earlier := end.Add(-time.Hour)
	unanswered := func() error {
		return &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Code: "timeout", Unanswered: true, Message: "no answer"}
	}
	type want struct {
		status       protocol.Status
		outcome      string
		observed     string
		keepJob      bool
		resendBefore *time.Time
		staleKey     bool
		bug          bool
		retryAfter   time.Duration
	}
	for _, tc := range []struct {
		name string
		in   answer
		want want
	}{
		{"yes", answer{res: &vendorapi.DispatchResult{VendorRef: "pi_1", Result: json.RawMessage(`{}`)}},
			want{status: protocol.StatusSucceeded, outcome: "succeeded", observed: "succeeded"}},
		{"refused", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "card_declined"}},
			want{status: protocol.StatusFailed, outcome: "permanent", observed: "permanent"}},
		{"oncebox bug", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "idempotency_error", Bug: true}},
			want{status: protocol.StatusNeedsReview, outcome: "permanent", observed: "permanent", bug: true}},
		{"retryable", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable, Code: "rate_limited"}},
			want{status: protocol.StatusPending, outcome: "retryable", observed: "retryable", keepJob: true}},
		{"retryable with Retry-After", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable, RetryAfter: 7 * time.Second}},
			want{status: protocol.StatusPending, outcome: "retryable", observed: "retryable", keepJob: true, retryAfter: 7 * time.Second}},
		{"retryable after a request that may have been carried out", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable},
			claimResendBefore: &earlier, windowEnd: end, windowOpen: true},
			want{status: protocol.StatusPending, outcome: "retryable", observed: "retryable", keepJob: true, resendBefore: &end}},
		{"retryable, attempts exhausted", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable}, exhausted: true},
			want{status: protocol.StatusNeedsReview, outcome: "retryable", observed: "retryable"}},
		{"retryable, exhausted, maybe carried out", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable},
			claimResendBefore: &earlier, exhausted: true},
			want{status: protocol.StatusUnknown, outcome: "unknown", observed: "unknown"}},
		{"unanswered inside the key window", answer{err: unanswered(), windowEnd: end, windowOpen: true},
			want{status: protocol.StatusPending, outcome: "unanswered", observed: "retryable", keepJob: true, resendBefore: &end}},
		{"unanswered outside the key window", answer{err: unanswered(), windowEnd: end},
			want{status: protocol.StatusUnknown, outcome: "unknown", observed: "unknown"}},
		{"unanswered inside the window, exhausted", answer{err: unanswered(), windowEnd: end, windowOpen: true, exhausted: true},
			want{status: protocol.StatusUnknown, outcome: "unknown", observed: "unknown"}},
		{"unknown, stored failure replayed", answer{err: &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Replayed: true}},
			want{status: protocol.StatusUnknown, outcome: "unknown", observed: "unknown", staleKey: true}},
		{"unclassified error", answer{err: errors.New("boom")},
			want{status: protocol.StatusUnknown, outcome: "unknown", observed: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := recordOf(tc.in)
			got := want{status: rec.record.status, outcome: rec.record.outcome, observed: rec.observed, keepJob: rec.record.keepJob,
				resendBefore: rec.record.resendBefore, staleKey: rec.record.staleKey, bug: rec.bug, retryAfter: rec.retryAfter}
			require.Equal(t, tc.want, got)
			if tc.want.status == protocol.StatusSucceeded {
				require.Equal(t, "pi_1", rec.record.vendorRef)
				return
			}
			var stored struct {
				Class       string
				NothingSent bool `json:"nothing_sent"`
			}
			require.NoError(t, json.Unmarshal(rec.record.errJSON, &stored))
			require.NotEmpty(t, stored.Class, "the stored error names its class")
			// Only retryable failures to the end prove that nothing was carried out.
			require.Equal(t, tc.name == "retryable, attempts exhausted", stored.NothingSent)
		})
	}
}
