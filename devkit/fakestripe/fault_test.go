package fakestripe_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

func TestFaultStored500(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultStored500})

	_, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
	se := requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
	require.Equal(t, "false", se.LastResponse.Header.Get("Stripe-Should-Retry"))
	require.Zero(t, h.fake.CreatedCount())

	// The 500 is stored: the same key replays it and still creates nothing.
	_, err = h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
	se = requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Zero(t, h.fake.CreatedCount())

	// Another key goes through.
	_, err = h.sc.PaymentIntents.New(piParams("key-2", "op-1", 100))
	require.NoError(t, err)
	require.Equal(t, 1, h.fake.CreatedCount())
}

// TestFaultsThatStoreNothing: a 429, a 409 and a connection dropped before anything
// happened create nothing and store nothing under the key, so the same key then runs.
func TestFaultsThatStoreNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault fakestripe.Fault
		check func(t *testing.T, err error)
	}{
		{"429", fakestripe.Fault{Kind: fakestripe.Fault429, RetryAfter: 1500 * time.Millisecond}, func(t *testing.T, err error) {
			se := requireStripeError(t, err, http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeRateLimit)
			require.Equal(t, "2", se.LastResponse.Header.Get("Retry-After"))
		}},
		{"409", fakestripe.Fault{Kind: fakestripe.Fault409}, func(t *testing.T, err error) {
			requireStripeError(t, err, http.StatusConflict, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeIdempotencyKeyInUse)
		}},
		{"DropBeforeCreate", fakestripe.Fault{Kind: fakestripe.FaultDropBeforeCreate}, requireNetworkError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakestripe.Config{})
			h.fake.InjectFault(tc.fault)

			_, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
			tc.check(t, err)
			require.Zero(t, h.fake.CreatedCount())

			pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
			require.NoError(t, err)
			require.Empty(t, pi.LastResponse.Header.Get("Idempotent-Replayed"))
			require.Equal(t, 1, h.fake.CreatedCount())
		})
	}
}

func TestFaultDropAfterCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate})

	_, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
	requireNetworkError(t, err)
	pis, _ := h.fake.ByTag("oncebox_op", "op-1")
	require.Len(t, pis, 1, "the object exists although the caller saw no answer")

	// The answer was stored: the same key replays it.
	pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
	require.NoError(t, err)
	require.Equal(t, pis[0].ID, pi.ID)
	require.Equal(t, "true", pi.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, h.fake.CreatedCount())
}

func TestFaultHang(t *testing.T) {
	t.Parallel()

	t.Run("answers after HangFor", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakestripe.Config{HangFor: 100 * time.Millisecond})
		h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultHang})

		start := time.Now()
		pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
		require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
		require.Equal(t, 1, h.fake.CreatedCount())
	})

	t.Run("client times out after the object was created", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakestripe.Config{HangFor: 10 * time.Second})
		h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultHang})
		impatient := newClient(h.srv.URL, &http.Client{
			Transport: &http.Transport{DisableKeepAlives: true},
			Timeout:   100 * time.Millisecond,
		})

		start := time.Now()
		_, err := impatient.PaymentIntents.New(piParams("key-1", "op-1", 100))
		requireNetworkError(t, err)
		require.Less(t, time.Since(start), 5*time.Second)
		require.Equal(t, 1, h.fake.CreatedCount())

		// The hang ends when the client goes away; the stored answer replays.
		require.Eventually(t, func() bool {
			pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
			return err == nil && pi.LastResponse.Header.Get("Idempotent-Replayed") == "true"
		}, 5*time.Second, 20*time.Millisecond)
		require.Equal(t, 1, h.fake.CreatedCount())
	})
}

func TestFaultPathAndOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.Fault409, Path: "/v1/refunds"})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultStored500, Path: "/v1/refunds"})

	// A payment intent is not affected by refund faults.
	pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 100))
	require.NoError(t, err)

	_, err = h.sc.Refunds.New(refundParams("re-1", pi.ID, 10))
	requireStripeError(t, err, http.StatusConflict, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeIdempotencyKeyInUse)
	_, err = h.sc.Refunds.New(refundParams("re-1", pi.ID, 10))
	requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
	_, err = h.sc.Refunds.New(refundParams("re-2", pi.ID, 10))
	require.NoError(t, err)
	require.Len(t, h.fake.Refunds(), 1)
	require.Equal(t, 4, h.fake.Requests())
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()

	t.Run("always", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakestripe.Config{})
		h.fake.SetRandomFaults(map[fakestripe.FaultKind]float64{fakestripe.Fault429: 1}, 1)
		for range 3 {
			_, err := h.sc.PaymentIntents.New(piParams("", "op-1", 100))
			requireStripeError(t, err, http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeRateLimit)
		}
		h.fake.SetRandomFaults(nil, 0)
		_, err := h.sc.PaymentIntents.New(piParams("", "op-1", 100))
		require.NoError(t, err)
		require.Equal(t, 1, h.fake.CreatedCount())
	})

	t.Run("same seed, same draws", func(t *testing.T) {
		t.Parallel()
		outcomes := func() []int {
			h := newHarness(t, fakestripe.Config{})
			h.fake.SetRandomFaults(map[fakestripe.FaultKind]float64{
				fakestripe.Fault429:       0.3,
				fakestripe.FaultStored500: 0.3,
			}, 42)
			var got []int
			for range 30 {
				_, err := h.sc.PaymentIntents.New(piParams("", "op-1", 100))
				status := http.StatusOK
				if err != nil {
					var se *stripe.Error
					require.ErrorAs(t, err, &se)
					status = se.HTTPStatusCode
				}
				got = append(got, status)
			}
			return got
		}
		first := outcomes()
		require.Equal(t, first, outcomes())
		require.Contains(t, first, http.StatusOK)
		require.Contains(t, first, http.StatusTooManyRequests)
		require.Contains(t, first, http.StatusInternalServerError)
	})
}

func TestKeepAliveResendAfterDrop(t *testing.T) {
	t.Parallel()
	// Pins the net/http behaviour the package documentation warns about: on a
	// reused connection, a POST carrying Idempotency-Key is resent by the
	// transport when the server drops the connection without answering.
	h := newHarness(t, fakestripe.Config{})
	keepAlive := newClient(h.srv.URL, h.srv.Client())

	_, err := keepAlive.PaymentIntents.New(piParams("key-0", "op-0", 100))
	require.NoError(t, err)

	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultDropAfterCreate})
	pi, err := keepAlive.PaymentIntents.New(piParams("key-1", "op-1", 100))
	require.NoError(t, err, "the transport resent the request")
	require.Equal(t, "true", pi.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 3, h.fake.Requests())
	require.Equal(t, 2, h.fake.CreatedCount())
}
