package sendgrid_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

// These tests run ops through the real dispatch worker, against a real Postgres
// and the fake SendGrid, and count the emails that went out.

// settleWait is how long an op may take to reach the state a test waits for.
const settleWait = 15 * time.Second

// harness is an Outbox working sendgrid.mail ops against one fake SendGrid.
type harness struct {
	ob     *outbox.Outbox
	pool   *pgxpool.Pool
	w      *wire
	sg     *sendgrid.Vendor
	tenant int64
}

func startHarness(t *testing.T, w *wire, adjust func(*sendgrid.Config)) *harness {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.Schema(t)
	h := &harness{w: w, sg: newVendor(t, w, adjust), pool: pool}
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_tenant (name) VALUES ('t') RETURNING id`).Scan(&h.tenant))
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	h.ob, err = outbox.New(outbox.Config{
		Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{h.sg}, RetryBackoff: func(int) time.Duration { return 50 * time.Millisecond },
		FetchPollInterval: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, h.ob.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.ob.Stop(ctx))
	})
	return h
}

func (h *harness) enqueue(t *testing.T, key string, args json.RawMessage) *outbox.EnqueueResult {
	t.Helper()
	res, err := h.ob.Enqueue(t.Context(), outbox.EnqueueParams{TenantID: h.tenant, Key: key, Tool: protocol.ToolMail, Args: args})
	require.NoError(t, err)
	return res
}

// waitStatus polls the op under key until it reaches want, failing at once if
// it settles on another status.
func (h *harness) waitStatus(t *testing.T, key string, want protocol.Status) *outbox.Op {
	t.Helper()
	deadline := time.Now().Add(settleWait)
	for {
		op, err := h.ob.Get(t.Context(), h.tenant, key)
		require.NoError(t, err)
		if op.Status == want {
			return op
		}
		if op.Status.Settled() || op.Status == protocol.StatusUnknown {
			require.FailNow(t, "op settled on another status", "want %s, got %s; error %s", want, op.Status, op.Error)
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "op did not settle", "want %s, still %s", want, op.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireStill waits until the op's dispatch job can no longer run and checks that
// nothing more was sent and the op stayed as it was.
func (h *harness) requireStill(t *testing.T, key string, status protocol.Status, emails int) {
	t.Helper()
	op, err := h.ob.Get(t.Context(), h.tenant, key)
	require.NoError(t, err)
	optest.WaitJobsFinished(t, h.pool, op.ID)
	require.Equal(t, emails, h.w.fake.SendCount())
	op, err = h.ob.Get(t.Context(), h.tenant, key)
	require.NoError(t, err)
	require.Equal(t, status, op.Status)
}

func TestWorkerSendsOnce(t *testing.T) {
	t.Parallel()
	h := startHarness(t, startWire(t, unlimited()), nil)
	h.enqueue(t, "ok", simpleArgs("ann@example.com"))
	op := h.waitStatus(t, "ok", protocol.StatusSucceeded)

	require.Equal(t, 1, h.w.fake.SendCount())
	msg := h.w.fake.Messages()[0]
	require.Equal(t, msg.XMessageID, op.VendorRef)
	require.Equal(t, op.ID, msg.CustomArgs[vendorapi.TagKey])
	require.JSONEq(t, `{"message_id":"`+msg.XMessageID+`","status":202}`, string(op.Result))
}

// TestWorkerLostAnswerIsUnknownAndFoundOnce: SendGrid took the email but the
// answer never came back. The op must end unknown, never be resent, and be
// found once by its tag when the activity API catches up.
func TestWorkerLostAnswerIsUnknownAndFoundOnce(t *testing.T) {
	t.Parallel()
	w := startWire(t, fakesendgrid.Config{ActivityRatePerMinute: -1, ActivityLag: time.Hour})
	h := startHarness(t, w, nil)
	w.fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})

	h.enqueue(t, "lost", simpleArgs("ann@example.com", "bob@example.com", "cat@example.com"))
	op := h.waitStatus(t, "lost", protocol.StatusUnknown)
	require.Equal(t, 1, w.fake.SendCount())
	require.Contains(t, string(op.Error), "connection_lost")
	h.requireStill(t, "lost", protocol.StatusUnknown, 1)
	require.Equal(t, 1, w.posts(), "nothing was resent")

	params := vendorapi.LookupParams{OpID: op.ID, TenantID: op.TenantID, Tool: op.Tool, Args: op.Args, VendorRef: op.VendorRef}
	found, err := h.sg.Lookup(t.Context(), params)
	require.NoError(t, err)
	require.Empty(t, found.Objects, "within the activity lag the message is not visible yet")

	w.fake.SetActivityLag(0)
	found, err = h.sg.Lookup(t.Context(), params)
	require.NoError(t, err)
	require.Len(t, found.Objects, 1, "three recipients, one email")
	require.Equal(t, w.fake.Messages()[0].XMessageID, found.Objects[0].ID)
	require.Equal(t, op.ID, found.Objects[0].OpID)
}

// TestWorkerResendsASendThatNeverLeft: the first attempt cannot connect, so the
// worker sends again and exactly one email goes out.
func TestWorkerResendsASendThatNeverLeft(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	closed := closedAddr(t)
	var dials atomic.Int32
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			addr = closed // Connection refused: the request never leaves.
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	h := startHarness(t, w, func(c *sendgrid.Config) { c.HTTPClient = &http.Client{Transport: transport} })

	h.enqueue(t, "refused", simpleArgs("ann@example.com"))
	op := h.waitStatus(t, "refused", protocol.StatusSucceeded)
	require.Equal(t, 1, w.fake.SendCount())
	require.Equal(t, w.fake.Messages()[0].XMessageID, op.VendorRef)
	require.Equal(t, 2, op.Attempts, "the refused attempt, then the one that sent")
	require.GreaterOrEqual(t, dials.Load(), int32(2))
}

// TestWorkerActivityForbiddenCannotTell: without the Email Activity add-on an
// unknown send cannot be looked up, and it is not sent again.
func TestWorkerActivityForbiddenCannotTell(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	w.fake.SetActivityForbidden(true)
	h := startHarness(t, w, nil)
	w.fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})

	h.enqueue(t, "forbidden", simpleArgs("ann@example.com"))
	op := h.waitStatus(t, "forbidden", protocol.StatusUnknown)
	_, err := h.sg.Lookup(t.Context(), vendorapi.LookupParams{OpID: op.ID, Args: op.Args})
	require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable)
	h.requireStill(t, "forbidden", protocol.StatusUnknown, 1)
	require.Equal(t, 1, w.posts())
}

// TestWorkerRateLimitedSendWaits: a 429 snoozes the job until X-RateLimit-Reset,
// then exactly one email goes out.
func TestWorkerRateLimitedSendWaits(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	h := startHarness(t, w, nil)
	w.fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.Fault429, RateLimitReset: time.Second})

	start := time.Now()
	h.enqueue(t, "limited", simpleArgs("ann@example.com"))
	op := h.waitStatus(t, "limited", protocol.StatusSucceeded)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "the job waited for the reset, not the 50 ms backoff")
	require.Equal(t, 1, w.fake.SendCount())
	require.Equal(t, 2, w.posts())
	require.Equal(t, 2, op.Attempts)
}

// TestWorkerRefusalFailsAndReplays: a 400 fails the op with SendGrid's errors
// stored, and the same key enqueued again replays that failure without a POST.
func TestWorkerRefusalFailsAndReplays(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	h := startHarness(t, w, nil)
	errs := `{"errors":[{"message":"The from address does not match a verified Sender Identity.","field":"from","help":null}]}`
	w.refuseNext(http.StatusBadRequest, errs)

	args := simpleArgs("ann@example.com")
	h.enqueue(t, "refused", args)
	op := h.waitStatus(t, "refused", protocol.StatusFailed)
	var stored struct {
		Class      string          `json:"class"`
		Code       string          `json:"code"`
		HTTPStatus int             `json:"http_status"`
		Vendor     json.RawMessage `json:"vendor"`
	}
	require.NoError(t, json.Unmarshal(op.Error, &stored))
	require.Equal(t, "permanent", stored.Class)
	require.Equal(t, "bad_request", stored.Code)
	require.Equal(t, http.StatusBadRequest, stored.HTTPStatus)
	require.JSONEq(t, errs, string(stored.Vendor))

	again := h.enqueue(t, "refused", args)
	require.True(t, again.Replayed)
	require.Equal(t, protocol.StatusFailed, again.Op.Status)
	require.Equal(t, string(op.Error), string(again.Op.Error), "the same answer, byte for byte")
	optest.WaitJobsFinished(t, h.pool, op.ID)
	require.Equal(t, 1, w.posts(), "the replay sent nothing")
	require.Zero(t, w.fake.SendCount())
}

// TestWorkerServerErrorIsUnknownNeverResent: a 500 after SendGrid stored the
// email leaves the op unknown, and it is never sent again.
func TestWorkerServerErrorIsUnknownNeverResent(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	h := startHarness(t, w, nil)
	w.fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.Fault500Stored})

	h.enqueue(t, "5xx", simpleArgs("ann@example.com"))
	op := h.waitStatus(t, "5xx", protocol.StatusUnknown)
	require.Contains(t, string(op.Error), "server_error")
	h.requireStill(t, "5xx", protocol.StatusUnknown, 1)
	require.Equal(t, 1, w.posts())
}
