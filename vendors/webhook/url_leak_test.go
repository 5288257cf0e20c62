package webhook_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// hookPath is a Slack-style base URL path: the credential is the path.
const hookPath = "/services/T0A1B2C3/B9Z8Y7X6/hookSecretPath4f2e"

// errorTexts is every text an error shows, through its chain.
func errorTexts(err error) []string {
	var texts []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		texts = append(texts, e.Error(), fmt.Sprintf("%+v", e))
	}
	var de *vendorapi.DispatchError
	if errors.As(err, &de) {
		texts = append(texts, de.Message, string(de.Body))
	}
	return texts
}

// TestTransportErrorsNameTargetAndPathOnly: a target's base URL may carry a
// credential in its path; the errors of a dispatch or a lookup that got no answer
// (refused, dropped, timed out) name the target and the tool's path, never the URL.
func TestTransportErrorsNameTargetAndPathOnly(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, fakewebhook.Config{HangFor: 5 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	v, err := webhook.New(webhook.Config{
		Targets: map[string]webhook.Target{
			"slack":  {BaseURL: srv.URL + hookPath},
			"closed": {BaseURL: closed + hookPath},
		},
		Timeout:    300 * time.Millisecond,
		LookupPath: "/_lookup",
	})
	require.NoError(t, err)

	type tc struct {
		name    string
		target  string
		fault   fakewebhook.FaultKind
		outcome vendorapi.Outcome
		code    string
	}
	for _, c := range []tc{
		{"refused", "closed", 0, vendorapi.OutcomeRetryable, "not_sent"},
		{"dropped", "slack", fakewebhook.FaultDropAfterEffect, vendorapi.OutcomeUnknown, "connection_lost"},
		{"timeout", "slack", fakewebhook.FaultHangAfterEffect, vendorapi.OutcomeUnknown, "timeout"},
	} {
		if c.fault != 0 {
			fake.InjectFault(fakewebhook.Fault{Kind: c.fault})
		}
		_, err := v.Dispatch(t.Context(), params("op-"+c.name, `{"target":"`+c.target+`","path":"/chat"}`))
		de := requireDispatchError(t, err, c.outcome, c.code)
		require.Contains(t, de.Error(), `webhook target "`+c.target+`" path "/chat"`, c.name)
		for _, text := range errorTexts(err) {
			require.NotContains(t, text, "hookSecretPath4f2e", "%s: %s", c.name, text)
		}
	}
	fake.ReleaseHangs()

	_, err = v.Lookup(t.Context(), vendorapi.LookupParams{OpID: "op-1", Args: json.RawMessage(`{"target":"closed","path":"/chat"}`)})
	require.Error(t, err)
	require.Contains(t, err.Error(), `webhook target "closed" path "/_lookup"`)
	for _, text := range errorTexts(err) {
		require.NotContains(t, text, "hookSecretPath4f2e", text)
	}
}

// TestSecretRedactedWhenBodyIsCut: a receiver that echoes the secret header right
// where the body is cut at MaxResultBytes must not leave the start of the secret in
// the stored result or error.
func TestSecretRedactedWhenBodyIsCut(t *testing.T) {
	t.Parallel()
	const limit = 1024
	for cut := 1; cut < len(secret); cut++ {
		// The secret starts cut bytes before the limit.
		body := strings.Repeat("a", limit-cut) + secret + strings.Repeat("b", 100)
		for _, status := range []int{http.StatusOK, http.StatusBadRequest, http.StatusInternalServerError} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			v := newVendor(t, srv.URL, func(c *webhook.Config) { c.MaxResultBytes = limit })
			res, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/x"}`))
			srv.Close()
			texts := errorTexts(err)
			if res != nil {
				texts = append(texts, string(res.Result))
			}
			require.NotEmpty(t, texts)
			for _, text := range texts {
				// The padding runs into the secret: "a" then its first byte.
				require.NotContains(t, text, "a"+secret[:1], "cut %d, status %d", cut, status)
				require.NotContains(t, text, secret)
			}
		}
	}
}
