package fakesendgrid

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sendgrid/sendgrid-go"
	"github.com/sendgrid/sendgrid-go/helpers/mail"
	"github.com/stretchr/testify/require"
)

func TestSendAccepted(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})

	req := sendgrid.GetRequest(testKey, "/v3/mail/send", srv.URL)
	req.Method = "POST"
	req.Body = mail.GetRequestBody(testMail("op_1", "ann@example.com", "bob@example.com"))
	resp, err := sendgrid.MakeRequest(req)
	require.NoError(t, err)

	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Empty(t, resp.Body)
	id := resp.Headers["X-Message-Id"][0]
	require.Len(t, id, 22)
	_, err = base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err)

	require.Equal(t, 1, fake.SendCount())
	msgs := fake.Messages()
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, id, m.XMessageID)
	require.Equal(t, "shop@example.com", m.From)
	require.Equal(t, []string{"ann@example.com", "bob@example.com"}, m.To)
	require.Equal(t, "Your receipt", m.Subject)
	require.Equal(t, []string{"receipt"}, m.Categories)
	require.Equal(t, map[string]string{"oncebox_op": "op_1"}, m.CustomArgs)
	require.NotContains(t, m.Headers, "Authorization", "the API key must not be kept")
	require.False(t, m.AcceptedAt.IsZero())
}

func TestSendThroughClient(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})

	client := &sendgrid.Client{Request: sendgrid.GetRequest(testKey, "/v3/mail/send", srv.URL)}
	client.Method = "POST"
	resp, err := client.Send(testMail("op_1", "ann@example.com"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, 1, fake.SendCount())
}

func TestSendGzipBody(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})

	client := &sendgrid.Client{Request: sendgrid.GetRequest(testKey, "/v3/mail/send", srv.URL)}
	client.Method = "POST"
	client.Headers["Content-Encoding"] = "gzip"
	resp, err := client.Send(testMail("op_gz", "ann@example.com"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Len(t, fake.ByCustomArg("oncebox_op", "op_gz"), 1)
}

func TestSendSameBodyTwiceIsTwoEmails(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	body := mail.GetRequestBody(testMail("op_1", "ann@example.com"))
	headers := map[string]string{"Idempotency-Key": "op_1"}

	var ids []string
	for range 2 {
		resp, err := postMail(t.Context(), srv, body, headers)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		ids = append(ids, resp.Headers["X-Message-Id"][0])
	}

	require.NotEqual(t, ids[0], ids[1], "every call gets a new X-Message-Id")
	require.Equal(t, 2, fake.SendCount(), "SendGrid ignores Idempotency-Key: two calls are two emails")
	msgs := fake.ByCustomArg("oncebox_op", "op_1")
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		require.Equal(t, "op_1", m.Headers["Idempotency-Key"])
	}
}

func TestSendRequiresBearerKey(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	body := mail.GetRequestBody(testMail("op_1", "ann@example.com"))

	for _, auth := range []string{"", "Bearer ", "Basic dXNlcjpwYXNz", "SG.key"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v3/mail/send", bytes.NewReader(body))
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())

		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "auth %q", auth)
		decodeErrors(t, buf.String())
	}
	require.Zero(t, fake.SendCount())
}

func TestSendRejectsInvalidBody(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})

	manyTos := make([]string, 1001)
	for i := range manyTos {
		manyTos[i] = fmt.Sprintf(`{"email":"r%d@example.com"}`, i)
	}
	from := `"from":{"email":"shop@example.com"}`
	content := `"subject":"Hi","content":[{"type":"text/plain","value":"x"}]`
	to := `"personalizations":[{"to":[{"email":"ann@example.com"}]}]`

	tests := []struct {
		name, body, field string
	}{
		{"not JSON", `{"personalizations":`, ""},
		{"no personalizations", `{` + from + `,` + content + `}`, "personalizations"},
		{"empty to", `{"personalizations":[{"to":[]}],` + from + `,` + content + `}`, "personalizations.0.to"},
		{"bad to address", `{"personalizations":[{"to":[{"email":"not-an-address"}]}],` + from + `,` + content + `}`, "personalizations.0.to.0.email"},
		{"bad cc address", `{"personalizations":[{"to":[{"email":"a@example.com"}],"cc":[{"email":"x"}]}],` + from + `,` + content + `}`, "personalizations.0.cc.0.email"},
		{"no from", `{` + to + `,` + content + `}`, "from"},
		{"bad from", `{` + to + `,"from":{"email":"shop"},` + content + `}`, "from.email"},
		{"no subject", `{` + to + `,` + from + `,"content":[{"type":"text/plain","value":"x"}]}`, "subject"},
		{"no content", `{` + to + `,` + from + `,"subject":"Hi"}`, "content"},
		{"empty content value", `{` + to + `,` + from + `,"subject":"Hi","content":[{"type":"text/plain","value":""}]}`, "content.0.value"},
		{"too many recipients", `{"personalizations":[{"to":[` + strings.Join(manyTos, ",") + `]}],` + from + `,` + content + `}`, "personalizations"},
		{"non-string custom arg", `{` + to + `,` + from + `,` + content + `,"custom_args":{"n":1}}`, "custom_args.n"},
		{"non-string personalization arg", `{"personalizations":[{"to":[{"email":"a@example.com"}],"custom_args":{"b":true}}],` + from + `,` + content + `}`, "personalizations.0.custom_args.b"},
		{"custom args too large", `{` + to + `,` + from + `,` + content + `,"custom_args":{"big":"` + strings.Repeat("x", 9998) + `"}}`, "custom_args"},
		{"subject not a string", `{` + to + `,` + from + `,"subject":5,"content":[{"type":"text/plain","value":"x"}]}`, "subject"},
		{"too many categories", `{` + to + `,` + from + `,` + content + `,"categories":["1","2","3","4","5","6","7","8","9","10","11"]}`, "categories"},
	}
	for _, tt := range tests {
		resp, err := postMail(t.Context(), srv, []byte(tt.body), nil)
		require.NoError(t, err, tt.name)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tt.name, resp.Body)
		require.Empty(t, resp.Headers["X-Message-Id"], tt.name)
		e := decodeErrors(t, resp.Body)
		if tt.field == "" {
			require.Nil(t, e.Errors[0].Field, tt.name)
		} else {
			require.NotNil(t, e.Errors[0].Field, tt.name)
			require.Equal(t, tt.field, *e.Errors[0].Field, tt.name)
		}
		require.Contains(t, resp.Body, `"help":null`, tt.name)
	}
	require.Zero(t, fake.SendCount())
	require.Empty(t, fake.Messages())
}

func TestSendCustomArgsJustUnderLimit(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	m := testMail("op_1", "ann@example.com") // "oncebox_op"+"op_1" = 14 bytes
	m.SetCustomArg("big", strings.Repeat("x", 10000-1-14-len("big")))

	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(m), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, 1, fake.SendCount())
}

func TestSendTemplateNeedsNoSubjectOrContent(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	m := mail.NewV3Mail()
	m.SetFrom(mail.NewEmail("", "shop@example.com"))
	m.SetTemplateID("d-0123456789abcdef")
	p := mail.NewPersonalization()
	p.AddTos(mail.NewEmail("Ann", "ann@example.com"))
	p.SetDynamicTemplateData("total", 42)
	m.AddPersonalizations(p)

	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(m), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, "d-0123456789abcdef", fake.Messages()[0].TemplateID)
}

func TestSendMergesCustomArgs(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	m := testMail("op_pers", "ann@example.com")
	m.SetCustomArg("oncebox_op", "op_msg")
	m.SetCustomArg("tenant", "acme")
	second := mail.NewPersonalization()
	second.AddTos(mail.NewEmail("", "bob@example.com"))
	second.SetCustomArg("only_second", "x")
	m.AddPersonalizations(second)

	resp, err := postMail(t.Context(), srv, mail.GetRequestBody(m), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)

	got := fake.Messages()[0]
	require.Equal(t, map[string]string{"oncebox_op": "op_pers", "tenant": "acme"}, got.CustomArgs,
		"message args merged with the first personalization's, which wins")
	require.Equal(t, []string{"ann@example.com", "bob@example.com"}, got.To)
	require.Len(t, fake.ByCustomArg("oncebox_op", "op_pers"), 1)
	require.Empty(t, fake.ByCustomArg("oncebox_op", "op_msg"))
}

func TestSendBodyTooLarge(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	body := bytes.Repeat([]byte(" "), maxBodyBytes+1)

	resp, err := postMail(t.Context(), srv, body, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	decodeErrors(t, resp.Body)
	require.Zero(t, fake.SendCount())
}

func TestSendConcurrent(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	const workers, perWorker = 8, 10

	ids := make(chan string, workers*perWorker)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				body := mail.GetRequestBody(testMail(fmt.Sprintf("op_%d_%d", w, i), "ann@example.com"))
				resp, err := postMail(context.Background(), srv, body, nil)
				if err != nil || resp.StatusCode != http.StatusAccepted {
					ids <- ""
					continue
				}
				ids <- resp.Headers["X-Message-Id"][0]
			}
		})
	}
	wg.Wait()
	close(ids)

	seen := map[string]bool{}
	for id := range ids {
		require.NotEmpty(t, id)
		require.False(t, seen[id], "duplicate X-Message-Id %s", id)
		seen[id] = true
	}
	require.Equal(t, workers*perWorker, fake.SendCount())
	require.Len(t, fake.Messages(), workers*perWorker)
}

func TestUnknownRoute(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, Config{})
	resp := getActivity(t, srv, "/v3/nope", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	decodeErrors(t, resp.Body)
}

// gzipBytes compresses b.
func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestSendBadGzip(t *testing.T) {
	t.Parallel()
	fake, srv := startFake(t, Config{})
	headers := map[string]string{"Content-Encoding": "gzip"}

	resp, err := postMail(t.Context(), srv, []byte("not gzip"), headers)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	decodeErrors(t, resp.Body)

	resp, err = postMail(t.Context(), srv, gzipBytes(t, mail.GetRequestBody(testMail("op_1", "ann@example.com"))), headers)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, 1, fake.SendCount())
}
