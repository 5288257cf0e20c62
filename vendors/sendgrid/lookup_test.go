package sendgrid_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

// clock is a controllable time for the fake.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestLookupGroupsRecipientsIntoOneMessage(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	ctx := t.Context()
	const opID = "0b7e6d1c-4f0a-4c55-9d7e-2a1f3c9b8e01"
	args := simpleArgs("ann@example.com", "bob@example.com", "cat@example.com")
	res, err := v.Dispatch(ctx, dispatchParams(opID, args))
	require.NoError(t, err)
	_, err = v.Dispatch(ctx, dispatchParams("another-op", simpleArgs("ann@example.com")))
	require.NoError(t, err)

	found, err := v.Lookup(ctx, vendorapi.LookupParams{OpID: opID, Args: args})
	require.NoError(t, err)
	require.Len(t, found.Objects, 1, "three recipients, one send")
	o := found.Objects[0]
	require.Equal(t, res.VendorRef, o.ID)
	require.Equal(t, opID, o.OpID)
	require.WithinDuration(t, time.Now(), o.Created, 2*time.Second)
	require.JSONEq(t, string(res.Result), string(o.Summary), "an adopted result reads like a dispatched one")

	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, []string{`unique_args['oncebox_op']="` + opID + `"`}, w.queries, "the query reached the API encoded once")
}

func TestLookupFindsEveryDuplicate(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	ctx := t.Context()
	args := simpleArgs("ann@example.com", "bob@example.com")
	_, err := v.Dispatch(ctx, dispatchParams("op_d", args))
	require.NoError(t, err)
	_, err = v.Dispatch(ctx, dispatchParams("op_d", args))
	require.NoError(t, err)

	found, err := v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_d", Args: args})
	require.NoError(t, err)
	require.Len(t, found.Objects, 2)
	require.NotEqual(t, found.Objects[0].ID, found.Objects[1].ID)

	found, err = v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_none", Args: args})
	require.NoError(t, err)
	require.Empty(t, found.Objects)
}

func TestLookupSeesAMessageOnlyAfterTheActivityLag(t *testing.T) {
	t.Parallel()
	var c clock
	w := startWire(t, fakesendgrid.Config{ActivityRatePerMinute: -1, ActivityLag: 10 * time.Minute, Now: c.now})
	v := newVendor(t, w, nil)
	require.Equal(t, sendgrid.DefaultLookupLag, v.LookupLag(), "the adapter's lag covers the API's")
	ctx := t.Context()
	_, err := v.Dispatch(ctx, dispatchParams("op_lag", simpleArgs("ann@example.com")))
	require.NoError(t, err)

	found, err := v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_lag"})
	require.NoError(t, err)
	require.Empty(t, found.Objects, "too young to be seen")

	c.advance(10 * time.Minute)
	found, err = v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_lag"})
	require.NoError(t, err)
	require.Len(t, found.Objects, 1)
}

func TestLookupForbiddenCannotTell(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	w.fake.SetActivityForbidden(true)
	_, err := v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op_1"})
	require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable)
	require.Contains(t, err.Error(), "403")
}

func TestLookupRateLimitedIsAPlainError(t *testing.T) {
	t.Parallel()
	w := startWire(t, fakesendgrid.Config{ActivityRatePerMinute: 1})
	v := newVendor(t, w, nil) // No cap of its own, so the API's limit shows.
	_, err := v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op_1"})
	require.NoError(t, err)
	_, err = v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op_1"})
	require.Error(t, err)
	require.NotErrorIs(t, err, vendorapi.ErrLookupUnavailable, "the reconciler tries again later")
	require.Contains(t, err.Error(), "429")
}

func TestLookupOtherFailuresAreErrors(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	v := newVendor(t, echo, nil)
	_, err := v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op_1"})
	require.Error(t, err)
	require.NotErrorIs(t, err, vendorapi.ErrLookupUnavailable)
	require.Contains(t, err.Error(), "HTTP 500")

	_, err = v.Lookup(t.Context(), vendorapi.LookupParams{OpID: `op"1`})
	require.Error(t, err, "an id that would break out of the query is refused")
}

func TestLookupFullPageOfOneMessageCannotTell(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	// A message with more recipients than the op's arguments show fills the page.
	to := make([]string, 100)
	for i := range to {
		to[i] = fmt.Sprintf("r%d@example.com", i)
	}
	w.fake.AddMessage(fakesendgrid.Message{From: "shop@example.com", To: to, Subject: "s", CustomArgs: map[string]string{vendorapi.TagKey: "op_big"}})
	_, err := v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op_big", Args: simpleArgs("ann@example.com")})
	require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable)

	// With the op's own arguments the page is large enough for two copies.
	args := simpleArgs(to...)
	found, err := v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op_big", Args: args})
	require.NoError(t, err)
	require.Len(t, found.Objects, 1)
}

func TestActivityLimiterIsSharedAndHonoursContext(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, func(c *sendgrid.Config) { c.ActivityRatePerMinute = 300 }) // One every 200 ms.
	ctx := t.Context()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_1"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, time.Since(start), 550*time.Millisecond, "four requests take three gaps")
	require.Equal(t, 4, w.activityRequests())

	slow := newVendor(t, w, func(c *sendgrid.Config) { c.ActivityRatePerMinute = 1 })
	_, err := slow.Lookup(ctx, vendorapi.LookupParams{OpID: "op_1"})
	require.NoError(t, err)
	short, cancel := contextWithTimeout(t, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = slow.Lookup(short, vendorapi.LookupParams{OpID: "op_1"})
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second, "no waiting a minute past the caller's deadline")
	require.Equal(t, 5, w.activityRequests(), "the refused lookup never reached the API")
}

func TestListMessages(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)

	res, err := v.Dispatch(ctx, dispatchParams("op_a", simpleArgs("ann@example.com", "bob@example.com")))
	require.NoError(t, err)
	w.fake.AddMessage(fakesendgrid.Message{XMessageID: "untagged", From: "x@example.com", To: []string{"y@example.com"}, Subject: "s", AcceptedAt: now.Add(-time.Minute)})
	w.fake.AddMessage(fakesendgrid.Message{XMessageID: "old", From: "x@example.com", To: []string{"y@example.com"}, Subject: "s",
		AcceptedAt: now.Add(-2 * time.Hour), CustomArgs: map[string]string{vendorapi.TagKey: "op_old"}})

	objs, err := v.ListMessages(ctx, now.Add(-time.Hour), now.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	require.Equal(t, "untagged", objs[0].ID)
	require.Empty(t, objs[0].OpID)
	require.Equal(t, res.VendorRef, objs[1].ID)
	require.Equal(t, "op_a", objs[1].OpID)
	require.WithinDuration(t, now, objs[1].Created, 2*time.Second)

	_, err = v.ListMessages(ctx, now, now.Add(-time.Hour))
	require.Error(t, err)
}

func TestListMessagesSplitsFullWindows(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	to := make([]string, 400)
	for i := range to {
		to[i] = fmt.Sprintf("r%d@example.com", i)
	}
	for i := range 3 { // 1,200 rows: more than one answer holds.
		w.fake.AddMessage(fakesendgrid.Message{XMessageID: fmt.Sprintf("m%d", i), From: "x@example.com", To: to, Subject: "s",
			AcceptedAt: base.Add(time.Duration(i) * 10 * time.Second), CustomArgs: map[string]string{vendorapi.TagKey: fmt.Sprintf("op_%d", i)}})
	}
	objs, err := v.ListMessages(t.Context(), base.Add(-time.Minute), base.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, objs, 3)
	for i, o := range objs {
		require.Equal(t, fmt.Sprintf("m%d", i), o.ID)
		require.Equal(t, fmt.Sprintf("op_%d", i), o.OpID)
	}
	require.Greater(t, w.activityRequests(), 4, "the window was split")
}
