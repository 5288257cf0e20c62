package fakestripe_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/devkit/fakestripe"
)

func searchIDs(t *testing.T, h *harness, query string) []string {
	t.Helper()
	it := h.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: query}})
	ids := []string{}
	for it.Next() {
		ids = append(ids, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	return ids
}

func TestSearchLag(t *testing.T) {
	t.Parallel()
	clk := newClock()
	h := newHarness(t, fakestripe.Config{SearchLag: time.Minute, Now: clk.Now})

	pi, err := h.sc.PaymentIntents.New(piParams("key-1", "op-1", 1500))
	require.NoError(t, err)
	query := `metadata["oncebox_op"]:"op-1"`

	require.Empty(t, searchIDs(t, h, query), "a fresh object must be invisible to search")
	clk.Advance(59 * time.Second)
	require.Empty(t, searchIDs(t, h, query))

	// Lists are not lagged.
	it := h.sc.PaymentIntents.List(&stripe.PaymentIntentListParams{})
	require.True(t, it.Next())
	require.Equal(t, pi.ID, it.PaymentIntent().ID)

	clk.Advance(time.Second)
	require.Equal(t, []string{pi.ID}, searchIDs(t, h, query))

	h.fake.SetSearchLag(time.Hour)
	require.Empty(t, searchIDs(t, h, query))
	h.fake.SetSearchLag(0)
	require.Equal(t, []string{pi.ID}, searchIDs(t, h, query))
}

func TestSearchClauses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})

	a, err := h.sc.PaymentIntents.New(piParams("key-a", "op-a", 100))
	require.NoError(t, err)
	bParams := piParams("key-b", "op-b", 200)
	bParams.AddMetadata("tenant", "t1")
	b, err := h.sc.PaymentIntents.New(bParams)
	require.NoError(t, err)
	declined := piParams("key-c", "op-b", 200)
	declined.PaymentMethod = stripe.String("pm_card_chargeDeclined")
	_, err = h.sc.PaymentIntents.New(declined)
	require.Error(t, err)
	c := h.fake.PaymentIntents()[2]

	require.Equal(t, []string{c.ID, b.ID}, searchIDs(t, h, `metadata["oncebox_op"]:"op-b"`))
	require.Equal(t, []string{b.ID}, searchIDs(t, h, `metadata["oncebox_op"]:"op-b" AND status:"succeeded"`))
	require.Equal(t, []string{b.ID}, searchIDs(t, h, `metadata["oncebox_op"]:"op-b" AND metadata["tenant"]:"t1"`))
	require.Equal(t, []string{c.ID, b.ID, a.ID}, searchIDs(t, h, `currency:"usd" AND amount>=100`))
	require.Equal(t, []string{a.ID}, searchIDs(t, h, `amount:100`))
	require.Equal(t, []string{c.ID, a.ID}, searchIDs(t, h, `metadata["oncebox_op"]:"op-a" OR status:"requires_payment_method"`))
	require.Equal(t, []string{c.ID, a.ID}, searchIDs(t, h, `-metadata["tenant"]:"t1"`))
	require.Empty(t, searchIDs(t, h, `metadata["oncebox_op"]:"op-z"`))

	// Paging through search results with limit and next_page.
	params := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: `currency:"usd"`, Limit: stripe.Int64(2)}}
	it := h.sc.PaymentIntents.Search(params)
	var ids []string
	for it.Next() {
		ids = append(ids, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{c.ID, b.ID, a.ID}, ids)

	bad := h.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: `nonsense`}})
	require.False(t, bad.Next())
	se := requireStripeError(t, bad.Err(), http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "")
	require.Equal(t, "query", se.Param)
}

func TestSearchResultShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	for i := range 3 {
		_, err := h.sc.PaymentIntents.New(piParams(fmt.Sprintf("key-%d", i), "op", 100))
		require.NoError(t, err)
	}
	var page struct {
		Object   string            `json:"object"`
		Data     []json.RawMessage `json:"data"`
		HasMore  bool              `json:"has_more"`
		NextPage *string           `json:"next_page"`
		URL      string            `json:"url"`
	}
	q := url.Values{"query": {`metadata["oncebox_op"]:"op"`}, "limit": {"2"}}
	status := getJSON(t, h, "/v1/payment_intents/search?"+q.Encode(), &page)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "search_result", page.Object)
	require.Len(t, page.Data, 2)
	require.True(t, page.HasMore)
	require.NotNil(t, page.NextPage)
	require.Equal(t, "/v1/payment_intents/search", page.URL)

	q.Set("page", *page.NextPage)
	status = getJSON(t, h, "/v1/payment_intents/search?"+q.Encode(), &page)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, page.Data, 1)
	require.False(t, page.HasMore)
	require.Nil(t, page.NextPage)
}

func TestRefundsHaveNoSearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	var body struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	status := getJSON(t, h, "/v1/refunds/search?query="+url.QueryEscape(`metadata["k"]:"v"`), &body)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "invalid_request_error", body.Error.Type)
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	clk := newClock()
	h := newHarness(t, fakestripe.Config{Now: clk.Now})

	var created []string // oldest first
	for i := range 5 {
		pi, err := h.sc.PaymentIntents.New(piParams(fmt.Sprintf("key-%d", i), "op", int64(100+i)))
		require.NoError(t, err)
		created = append(created, pi.ID)
		clk.Advance(10 * time.Second)
	}
	newestFirst := []string{created[4], created[3], created[2], created[1], created[0]}

	// One page by hand: limit 2, then starting_after the last id.
	params := &stripe.PaymentIntentListParams{}
	params.Limit = stripe.Int64(2)
	params.Single = true
	it := h.sc.PaymentIntents.List(params)
	var page []string
	for it.Next() {
		page = append(page, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, newestFirst[:2], page)
	require.True(t, it.PaymentIntentList().HasMore)
	require.Equal(t, "/v1/payment_intents", it.PaymentIntentList().URL)

	params.StartingAfter = stripe.String(page[1])
	it = h.sc.PaymentIntents.List(params)
	page = nil
	for it.Next() {
		page = append(page, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, newestFirst[2:4], page)
	require.True(t, it.PaymentIntentList().HasMore)

	// The iterator follows starting_after to the end.
	all := &stripe.PaymentIntentListParams{}
	all.Limit = stripe.Int64(2)
	it = h.sc.PaymentIntents.List(all)
	var ids []string
	for it.Next() {
		ids = append(ids, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, newestFirst, ids)

	// created[gte] keeps the three newest (created 20s, 30s, 40s after the first).
	since := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: newClock().Now().Add(20 * time.Second).Unix()}}
	it = h.sc.PaymentIntents.List(since)
	ids = nil
	for it.Next() {
		ids = append(ids, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, newestFirst[:3], ids)

	// ending_before walks backwards (the iterator reverses each page).
	back := &stripe.PaymentIntentListParams{}
	back.Limit = stripe.Int64(2)
	back.EndingBefore = stripe.String(created[0])
	it = h.sc.PaymentIntents.List(back)
	ids = nil
	for it.Next() {
		ids = append(ids, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, created[1:], ids)

	bad := &stripe.PaymentIntentListParams{}
	bad.StartingAfter = stripe.String("pi_missing")
	it = h.sc.PaymentIntents.List(bad)
	require.False(t, it.Next())
	requireStripeError(t, it.Err(), http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing)
}

func TestRefundList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	pi1, err := h.sc.PaymentIntents.New(piParams("pi-1", "op-1", 1000))
	require.NoError(t, err)
	pi2, err := h.sc.PaymentIntents.New(piParams("pi-2", "op-2", 1000))
	require.NoError(t, err)

	var want []string // newest first, refunds of pi1 only
	for i := range 3 {
		re, err := h.sc.Refunds.New(refundParams(fmt.Sprintf("re-%d", i), pi1.ID, 100))
		require.NoError(t, err)
		want = append([]string{re.ID}, want...)
	}
	_, err = h.sc.Refunds.New(refundParams("re-other", pi2.ID, 100))
	require.NoError(t, err)

	params := &stripe.RefundListParams{PaymentIntent: stripe.String(pi1.ID)}
	params.Limit = stripe.Int64(2)
	it := h.sc.Refunds.List(params)
	var ids []string
	for it.Next() {
		ids = append(ids, it.Refund().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, want, ids)

	byCharge := &stripe.RefundListParams{Charge: stripe.String(pi2.LatestCharge.ID)}
	it = h.sc.Refunds.List(byCharge)
	require.True(t, it.Next())
	require.Equal(t, pi2.ID, it.Refund().PaymentIntent.ID)
	require.False(t, it.Next())
	require.NoError(t, it.Err())
}

// getJSON sends an authenticated GET and decodes the answer into v.
func getJSON(t *testing.T, h *harness, path string, v any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_x")
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.Unmarshal(body, v), "body: %s", body)
	return resp.StatusCode
}

func TestSearchQuotedValues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakestripe.Config{})
	pi, err := h.sc.PaymentIntents.New(piParams("key-1", `a AND b OR "c"`, 100))
	require.NoError(t, err)

	require.Equal(t, []string{pi.ID}, searchIDs(t, h, `metadata["oncebox_op"]:"a AND b OR \"c\"" AND status:"succeeded"`))
	require.Empty(t, searchIDs(t, h, `metadata["oncebox_op"]:"a AND b"`))
}
