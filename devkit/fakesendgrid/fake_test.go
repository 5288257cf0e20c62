package fakesendgrid

import (
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"
	"github.com/sendgrid/sendgrid-go/helpers/mail"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/fakeclock"
)

const testKey = "SG.test-key"

// newTestClock returns a controllable Config.Now.
func newTestClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC))
}

// startFake serves a new fake over a real HTTP listener closed with the test.
func startFake(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	fake := New(cfg)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv
}

// testMail builds a one-personalization email tagged with oncebox_op=opID.
func testMail(opID string, to ...string) *mail.SGMailV3 {
	m := mail.NewV3Mail()
	m.SetFrom(mail.NewEmail("Shop", "shop@example.com"))
	m.Subject = "Your receipt"
	m.AddContent(mail.NewContent("text/plain", "Thank you."))
	m.AddCategories("receipt")
	p := mail.NewPersonalization()
	for _, addr := range to {
		p.AddTos(mail.NewEmail("", addr))
	}
	p.SetCustomArg("oncebox_op", opID)
	m.AddPersonalizations(p)
	return m
}

// postMail sends body to POST /v3/mail/send through the SDK's rest client,
// using the test server's own HTTP client and any extra headers.
func postMail(ctx context.Context, srv *httptest.Server, body []byte, headers map[string]string) (*rest.Response, error) {
	req := sendgrid.GetRequest(testKey, "/v3/mail/send", srv.URL)
	req.Method = rest.Post
	req.Body = body
	maps.Copy(req.Headers, headers)
	return (&rest.Client{HTTPClient: srv.Client()}).SendWithContext(ctx, req)
}

// getActivity calls an Email Activity endpoint through the SDK with the raw
// query parameters, as oncebox will.
func getActivity(t *testing.T, srv *httptest.Server, endpoint string, params map[string]string) *rest.Response {
	t.Helper()
	req := sendgrid.GetRequest(testKey, endpoint, srv.URL)
	req.Method = rest.Get
	req.QueryParams = params
	resp, err := (&rest.Client{HTTPClient: srv.Client()}).Send(req)
	require.NoError(t, err)
	return resp
}

// wireRow is a GET /v3/messages entry as a client decodes it.
type wireRow struct {
	FromEmail     string `json:"from_email"`
	MsgID         string `json:"msg_id"`
	Subject       string `json:"subject"`
	ToEmail       string `json:"to_email"`
	Status        string `json:"status"`
	OpensCount    int    `json:"opens_count"`
	ClicksCount   int    `json:"clicks_count"`
	LastEventTime string `json:"last_event_time"`
}

// searchActivity runs GET /v3/messages, requires 200 and returns its rows.
func searchActivity(t *testing.T, srv *httptest.Server, limit, query string) []wireRow {
	t.Helper()
	resp := getActivity(t, srv, "/v3/messages", map[string]string{"limit": limit, "query": query})
	require.Equal(t, 200, resp.StatusCode, resp.Body)
	var body struct {
		Messages []wireRow `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &body))
	require.NotNil(t, body.Messages, "messages must be an array, even when empty")
	return body.Messages
}

// wireErrors is SendGrid's error body.
type wireErrors struct {
	Errors []struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
	} `json:"errors"`
}

func decodeErrors(t *testing.T, body string) wireErrors {
	t.Helper()
	var e wireErrors
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.NotEmpty(t, e.Errors, body)
	require.NotEmpty(t, e.Errors[0].Message, body)
	return e
}
