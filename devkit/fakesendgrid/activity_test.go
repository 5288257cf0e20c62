package fakesendgrid

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/mail"
	"github.com/stretchr/testify/require"
)

// sendOK sends m and returns its X-Message-Id.
func sendOK(t *testing.T, srv *httptest.Server, m *mail.SGMailV3) string {
	t.Helper()
	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(m), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	return resp.Headers["X-Message-Id"][0]
}

func TestActivityByUniqueArgsAfterLag(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	_, srv := startFake(t, Config{ActivityLag: time.Minute, ActivityRatePerMinute: -1, Now: clock.Now})
	id := sendOK(t, srv, testMail("op_1", "ann@example.com"))
	sendOK(t, srv, testMail("op_2", "bob@example.com"))

	bare := `unique_args['oncebox_op']="op_1"`
	wrapped := `(unique_args['oncebox_op']="op_1")`
	require.Empty(t, searchActivity(t, srv, "10", bare), "not visible before the lag")

	clock.Advance(59 * time.Second)
	require.Empty(t, searchActivity(t, srv, "10", wrapped))

	clock.Advance(time.Second)
	for _, q := range []string{bare, wrapped} {
		rows := searchActivity(t, srv, "10", q)
		require.Len(t, rows, 1, q)
		require.Equal(t, wireRow{
			FromEmail:     "shop@example.com",
			MsgID:         id + ".filterdrecv-0",
			Subject:       "Your receipt",
			ToEmail:       "ann@example.com",
			Status:        "delivered",
			LastEventTime: "2026-03-14T15:09:26Z",
		}, rows[0])
	}
	require.Empty(t, searchActivity(t, srv, "10", `unique_args['oncebox_op']="op_3"`))
	require.Empty(t, searchActivity(t, srv, "10", `unique_args['other']="op_1"`))
}

func TestActivityRowShape(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, Config{})
	sendOK(t, srv, testMail("op_1", "ann@example.com"))

	resp := getActivity(t, srv, "/v3/messages", map[string]string{"limit": "1"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body map[string][]map[string]any
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &body))
	require.Len(t, body["messages"], 1)
	row := body["messages"][0]
	for _, key := range []string{"from_email", "msg_id", "subject", "to_email", "status", "opens_count", "clicks_count", "last_event_time"} {
		require.Contains(t, row, key)
	}
	require.InDelta(t, 0, row["opens_count"], 0)
}

func TestActivitySetActivityLag(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	fake, srv := startFake(t, Config{ActivityRatePerMinute: -1, Now: clock.Now})
	sendOK(t, srv, testMail("op_1", "ann@example.com"))
	require.Len(t, searchActivity(t, srv, "10", ""), 1, "no lag by default")

	fake.SetActivityLag(time.Hour)
	require.Empty(t, searchActivity(t, srv, "10", ""))
	clock.Advance(time.Hour)
	require.Len(t, searchActivity(t, srv, "10", ""), 1)
}

func TestActivityOneRowPerRecipient(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, Config{ActivityRatePerMinute: -1})
	id := sendOK(t, srv, testMail("op_1", "a@example.com", "b@example.com", "c@example.com"))

	rows := searchActivity(t, srv, "10", `unique_args['oncebox_op']="op_1"`)
	require.Len(t, rows, 3)
	for n, to := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		require.Equal(t, to, rows[n].ToEmail)
		require.Equal(t, id+".filterdrecv-"+strconv.Itoa(n), rows[n].MsgID)
	}

	require.Len(t, searchActivity(t, srv, "2", `unique_args['oncebox_op']="op_1"`), 2, "limit counts rows")
}

func TestActivityMsgIDLike(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, Config{ActivityRatePerMinute: -1})
	first := sendOK(t, srv, testMail("op_1", "a@example.com", "b@example.com"))
	sendOK(t, srv, testMail("op_2", "c@example.com"))

	rows := searchActivity(t, srv, "10", fmt.Sprintf("msg_id LIKE '%s%%'", first))
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Contains(t, r.MsgID, first)
	}

	rows = searchActivity(t, srv, "10", fmt.Sprintf(`msg_id LIKE '%s.filterdrecv-1%%' AND unique_args['oncebox_op']="op_1"`, first))
	require.Len(t, rows, 1)
	require.Equal(t, "b@example.com", rows[0].ToEmail)

	require.Empty(t, searchActivity(t, srv, "10", fmt.Sprintf(`msg_id LIKE '%s%%' AND unique_args['oncebox_op']="op_2"`, first)))
}

func TestActivityLastEventTimeBetween(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	_, srv := startFake(t, Config{ActivityRatePerMinute: -1, Now: clock.Now})
	sendOK(t, srv, testMail("op_old", "a@example.com"))
	clock.Advance(time.Hour)
	sendOK(t, srv, testMail("op_new", "b@example.com"))

	q := `last_event_time BETWEEN TIMESTAMP "2026-03-14T16:00:00Z" AND TIMESTAMP "2026-03-14T17:00:00Z"`
	rows := searchActivity(t, srv, "10", q)
	require.Len(t, rows, 1)
	require.Equal(t, "b@example.com", rows[0].ToEmail)

	rows = searchActivity(t, srv, "10", `(unique_args['oncebox_op']="op_old") AND last_event_time BETWEEN TIMESTAMP "2026-03-14T15:09:26Z" AND TIMESTAMP "2026-03-14T15:09:26Z"`)
	require.Len(t, rows, 1, "bounds are inclusive")
	require.Equal(t, "a@example.com", rows[0].ToEmail)
}

func TestActivityNewestFirst(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, Config{ActivityRatePerMinute: -1})
	sendOK(t, srv, testMail("op_1", "first@example.com"))
	sendOK(t, srv, testMail("op_2", "second@example.com"))

	rows := searchActivity(t, srv, "1", "")
	require.Len(t, rows, 1)
	require.Equal(t, "second@example.com", rows[0].ToEmail)
}

func TestActivityRejectsBadParams(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, Config{ActivityRatePerMinute: -1})

	for _, tt := range []struct {
		params map[string]string
		field  string
	}{
		{map[string]string{}, "limit"},
		{map[string]string{"limit": "0"}, "limit"},
		{map[string]string{"limit": "1001"}, "limit"},
		{map[string]string{"limit": "ten"}, "limit"},
		{map[string]string{"limit": "10", "query": `status="delivered"`}, "query"},
		{map[string]string{"limit": "10", "query": `(unique_args['k']="v"`}, "query"},
		{map[string]string{"limit": "10", "query": `unique_args['k']="v" OR msg_id LIKE 'x%'`}, "query"},
	} {
		resp := getActivity(t, srv, "/v3/messages", tt.params)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v", tt.params)
		e := decodeErrors(t, resp.Body)
		require.Equal(t, tt.field, *e.Errors[0].Field, "%v", tt.params)
	}
	require.Len(t, searchActivity(t, srv, "1000", ""), 0, "1000 is the largest allowed limit")
}

func TestActivityRateLimit(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	_, srv := startFake(t, Config{Now: clock.Now}) // Default: 6 a minute.
	params := map[string]string{"limit": "10"}

	for i := range 6 {
		resp := getActivity(t, srv, "/v3/messages", params)
		require.Equal(t, http.StatusOK, resp.StatusCode, "call %d", i+1)
		require.Equal(t, strconv.Itoa(5-i), resp.Headers["X-Ratelimit-Remaining"][0])
		clock.Advance(5 * time.Second)
	}
	first := newTestClock().Now()

	resp := getActivity(t, srv, "/v3/messages", params)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	decodeErrors(t, resp.Body)
	require.Equal(t, strconv.FormatInt(first.Add(time.Minute).Unix(), 10), resp.Headers["X-Ratelimit-Reset"][0],
		"reset is when the oldest call leaves the rolling minute")
	resp = getActivity(t, srv, "/v3/messages/x.filterdrecv-0", nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "details share the limit")

	clock.Advance(30 * time.Second) // first call is now exactly a minute old
	require.Equal(t, http.StatusOK, getActivity(t, srv, "/v3/messages", params).StatusCode)
	require.Equal(t, http.StatusTooManyRequests, getActivity(t, srv, "/v3/messages", params).StatusCode)
}

func TestActivityForbidden(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{ActivityRatePerMinute: -1})
	id := sendOK(t, srv, testMail("op_1", "ann@example.com"))

	fake.SetActivityForbidden(true)
	for _, endpoint := range []string{"/v3/messages", "/v3/messages/" + id + ".filterdrecv-0"} {
		resp := getActivity(t, srv, endpoint, map[string]string{"limit": "10"})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, endpoint)
		e := decodeErrors(t, resp.Body)
		require.Equal(t, "access forbidden", e.Errors[0].Message)
	}

	fake.SetActivityForbidden(false)
	require.Len(t, searchActivity(t, srv, "10", ""), 1)
}

func TestActivityMessageDetails(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	_, srv := startFake(t, Config{ActivityLag: time.Minute, ActivityRatePerMinute: -1, Now: clock.Now})
	m := testMail("op_1", "ann@example.com", "bob@example.com")
	m.SetCustomArg("tenant", "acme")
	id := sendOK(t, srv, m)
	path := "/v3/messages/" + id + ".filterdrecv-1"

	resp := getActivity(t, srv, path, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "not visible before the lag")

	clock.Advance(time.Minute)
	resp = getActivity(t, srv, path, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var got struct {
		wireRow
		Categories []string          `json:"categories"`
		UniqueArgs map[string]string `json:"unique_args"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &got))
	require.Equal(t, id+".filterdrecv-1", got.MsgID)
	require.Equal(t, "bob@example.com", got.ToEmail)
	require.Equal(t, "shop@example.com", got.FromEmail)
	require.Equal(t, "Your receipt", got.Subject)
	require.Equal(t, "delivered", got.Status)
	require.Equal(t, "2026-03-14T15:09:26Z", got.LastEventTime)
	require.Equal(t, []string{"receipt"}, got.Categories)
	require.Equal(t, map[string]string{"oncebox_op": "op_1", "tenant": "acme"}, got.UniqueArgs)

	for _, missing := range []string{id, id + ".filterdrecv-2", "nope.filterdrecv-0"} {
		resp := getActivity(t, srv, "/v3/messages/"+missing, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, missing)
	}
}

func TestActivitySeededMessage(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	fake, srv := startFake(t, Config{ActivityLag: time.Minute, ActivityRatePerMinute: -1, Now: clock.Now})
	fake.AddMessage(Message{
		From:       "shop@example.com",
		To:         []string{"ann@example.com"},
		Subject:    "Your receipt",
		CustomArgs: map[string]string{"oncebox_op": "op_1"},
		AcceptedAt: clock.Now().Add(-time.Hour),
	})
	sendOK(t, srv, testMail("op_1", "ann@example.com"))

	require.Equal(t, 1, fake.SendCount(), "seeded messages are not sends")
	msgs := fake.ByCustomArg("oncebox_op", "op_1")
	require.Len(t, msgs, 2)
	require.Len(t, msgs[0].XMessageID, 22, "a seeded message gets an id")

	rows := searchActivity(t, srv, "10", `unique_args['oncebox_op']="op_1"`)
	require.Len(t, rows, 1, "only the seeded, hour-old copy is past the lag")
	require.Equal(t, msgs[0].XMessageID+".filterdrecv-0", rows[0].MsgID)
}

func TestMessagesReturnsCopies(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	sendOK(t, srv, testMail("op_1", "ann@example.com"))

	msgs := fake.Messages()
	msgs[0].CustomArgs["oncebox_op"] = "changed"
	msgs[0].To[0] = "changed"
	require.Len(t, fake.ByCustomArg("oncebox_op", "op_1"), 1)
	require.Equal(t, "ann@example.com", fake.Messages()[0].To[0])
}
