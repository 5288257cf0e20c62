package fakesendgrid

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/mail"
	"github.com/stretchr/testify/require"
)

func TestFaultAcceptThenDrop(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	fake.InjectFault(Fault{Kind: FaultAcceptThenDrop})

	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.Error(t, err, "the client sees the connection die")
	require.Nil(t, resp)
	require.Equal(t, 1, fake.SendCount(), "yet the email went out")
	require.Len(t, fake.ByCustomArg("oncebox_op", "op_1"), 1)
	require.Len(t, searchActivity(t, srv, "10", `unique_args['oncebox_op']="op_1"`), 1, "and it can be found")
}

func TestFaultHang(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{HangFor: 10 * time.Second})
	fake.InjectFault(Fault{Kind: FaultHang})

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := postMail(ctx, srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, 1, fake.SendCount(), "the email was stored before the hang")
	// srv.Close in cleanup returns promptly only if the handler noticed the client left.
}

func TestFaultHangThenAnswers(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{HangFor: 100 * time.Millisecond})
	fake.InjectFault(Fault{Kind: FaultHang})

	start := time.Now()
	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, fake.Messages()[0].XMessageID, resp.Headers["X-Message-Id"][0])
}

func TestFault429(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	fake, srv := startFake(t, Config{Now: clock.Now})
	fake.InjectFault(Fault{Kind: Fault429, RateLimitReset: 30 * time.Second})
	body := mail.GetRequestBody(testMail("op_1", "ann@example.com"))

	resp, err := postMail(t.Context(), srv, body, nil)
	require.NoError(t, err, "the SDK returns non-2xx as a response")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, strconv.FormatInt(clock.Now().Add(30*time.Second).Unix(), 10), resp.Headers["X-Ratelimit-Reset"][0])
	decodeErrors(t, resp.Body)
	require.Zero(t, fake.SendCount())

	resp, err = postMail(t.Context(), srv, body, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "the fault applied to one send only")
	require.Equal(t, 1, fake.SendCount())
}

func TestFault500Stored(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	fake.InjectFault(Fault{Kind: Fault500Stored})

	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Empty(t, resp.Headers["X-Message-Id"])
	decodeErrors(t, resp.Body)
	require.Equal(t, 1, fake.SendCount())
	require.Len(t, searchActivity(t, srv, "10", `unique_args['oncebox_op']="op_1"`), 1)
}

func TestFault500NotStored(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	fake.InjectFault(Fault{Kind: Fault500NotStored})

	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	decodeErrors(t, resp.Body)
	require.Zero(t, fake.SendCount())
	require.Empty(t, fake.Messages())
}

func TestFaultDropBeforeAccept(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	fake.InjectFault(Fault{Kind: FaultDropBeforeAccept})

	_, err := postMail(t.Context(), srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.Error(t, err)
	require.Zero(t, fake.SendCount())
	require.Empty(t, fake.Messages())
}

func TestFaultQueueIsFIFO(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	fake.InjectFault(Fault{Kind: Fault429})
	fake.InjectFault(Fault{Kind: Fault500NotStored})
	fake.InjectFault(Fault{Kind: Fault500Stored})
	body := mail.GetRequestBody(testMail("op_1", "ann@example.com"))

	var got []int
	for range 4 {
		resp, err := postMail(t.Context(), srv, body, nil)
		require.NoError(t, err)
		got = append(got, resp.StatusCode)
	}
	require.Equal(t, []int{429, 500, 500, 202}, got)
	require.Equal(t, 2, fake.SendCount())
}

func TestFaultStoringKindStillValidates(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	fake.InjectFault(Fault{Kind: FaultAcceptThenDrop})

	resp, err := postMail(t.Context(), srv, []byte(`{}`), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "an invalid body is rejected, consuming the fault")
	require.Zero(t, fake.SendCount())

	resp, err = postMail(t.Context(), srv, mail.GetRequestBody(testMail("op_1", "ann@example.com")), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()
	body := mail.GetRequestBody(testMail("op_1", "ann@example.com"))
	run := func(rates map[FaultKind]float64, seed int64) ([]int, int) {
		fake, srv := startFake(t, Config{})
		fake.SetRandomFaults(rates, seed)
		var codes []int
		for range 30 {
			resp, err := postMail(t.Context(), srv, body, nil)
			require.NoError(t, err)
			codes = append(codes, resp.StatusCode)
		}
		return codes, fake.SendCount()
	}
	rates := map[FaultKind]float64{Fault500Stored: 0.3, Fault500NotStored: 0.3}

	codes, sent := run(rates, 7)
	again, sentAgain := run(rates, 7)
	require.Equal(t, codes, again, "same seed, same faults")
	require.Equal(t, sent, sentAgain)
	require.Contains(t, codes, 500)
	require.Contains(t, codes, 202)
	ok := 0
	for _, c := range codes {
		if c == 202 {
			ok++
		}
	}
	require.Greater(t, sent, ok, "Fault500Stored sends count although they answered 500")

	codes, sent = run(map[FaultKind]float64{Fault429: 1}, 1)
	require.NotContains(t, codes, 202)
	require.Zero(t, sent)

	fake, srv := startFake(t, Config{})
	fake.SetRandomFaults(map[FaultKind]float64{Fault500NotStored: 1}, 1)
	fake.SetRandomFaults(nil, 0)
	resp, err := postMail(t.Context(), srv, body, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "nil turns random faults off")
}

// TestIdempotencyKeyMakesNetHTTPReplay pins a trap rather than the fake: Go's
// http.Transport treats a POST carrying an Idempotency-Key header as
// replayable, so when a reused keep-alive connection dies before the answer it
// silently sends the request again. SendGrid ignores the key, so that is a
// second email the caller never hears about.
func TestIdempotencyKeyMakesNetHTTPReplay(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	body := mail.GetRequestBody(testMail("op_1", "ann@example.com"))
	headers := map[string]string{"Idempotency-Key": "op_1"}

	resp, err := postMail(t.Context(), srv, body, headers) // Opens the keep-alive connection.
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	fake.InjectFault(Fault{Kind: FaultAcceptThenDrop})
	resp, err = postMail(t.Context(), srv, body, headers)
	require.NoError(t, err, "net/http retried on a new connection")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, 3, fake.SendCount(), "two calls, three emails")

	// Without the header the same failure reaches the caller instead.
	fake.InjectFault(Fault{Kind: FaultAcceptThenDrop})
	_, err = postMail(t.Context(), srv, body, nil)
	require.Error(t, err)
	require.Equal(t, 4, fake.SendCount())
}
