package fakewebhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/testkit/fakeclock"
)

// reply is one answer of the fake.
type reply struct {
	status int
	header http.Header
	body   string
}

func start(t *testing.T, cfg fakewebhook.Config) (*fakewebhook.Server, *httptest.Server) {
	t.Helper()
	fake := fakewebhook.New(cfg)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() {
		fake.ReleaseHangs()
		srv.Close()
	})
	return fake, srv
}

// post sends a JSON POST without keep-alives, so that a dropped connection is
// seen as such. It may run off the test's goroutine.
func post(t *testing.T, url, key, opID, body string) (reply, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if opID != "" {
		req.Header.Set("Oncebox-Op", opID)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

func mustPost(t *testing.T, url, key, opID, body string) reply {
	t.Helper()
	r, err := post(t, url, key, opID, body)
	require.NoError(t, err)
	return r
}

func TestPostRecordsEffectAndAnswersID(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{})

	r := mustPost(t, srv.URL+"/orders/7", "key-1", "op-1", `{"a": 1}`)
	require.Equal(t, http.StatusOK, r.status)
	effects := fake.Effects()
	require.Len(t, effects, 1)
	e := effects[0]
	require.JSONEq(t, `{"id":"`+e.ID+`","ok":true}`, r.body)
	require.Equal(t, e.ID, r.header.Get("X-Request-Id"))
	require.Equal(t, "op-1", e.OpID)
	require.Equal(t, "key-1", e.Key)
	require.Equal(t, "/orders/7", e.Path)
	require.JSONEq(t, `{"a":1}`, string(e.Body))
	require.Equal(t, "application/json", e.Headers.Get("Content-Type"))
	require.Equal(t, 1, fake.Requests())
	require.Len(t, fake.EffectsFor("op-1"), 1)
	require.Empty(t, fake.EffectsFor("op-2"))
}

func TestHonourKeysReplaysStoredAnswer(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{HonourKeys: true})

	first := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	second := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	require.Equal(t, http.StatusOK, second.status)
	require.Equal(t, first.body, second.body)
	require.Equal(t, "true", second.header.Get("Idempotent-Replayed"))
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.header.Get("X-Request-Id"), second.header.Get("X-Request-Id"))
	require.Equal(t, 1, fake.EffectCount())
	require.Equal(t, 2, fake.Requests())

	// Another key is another effect.
	mustPost(t, srv.URL+"/x", "key-2", "op-2", `{}`)
	require.Equal(t, 2, fake.EffectCount())
}

func TestWithoutHonourKeysEveryPostIsAnEffect(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{})

	first := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	second := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	require.Empty(t, second.header.Get("Idempotent-Replayed"))
	require.NotEqual(t, first.header.Get("X-Request-Id"), second.header.Get("X-Request-Id"))
	require.Equal(t, 2, fake.EffectCount())
	require.Len(t, fake.EffectsFor("op-1"), 2)
}

func TestSetBlockHoldsTheAnswerAfterTheEffect(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{HonourKeys: true})
	release := make(chan struct{})
	fake.SetBlock(release)

	answered := make(chan reply, 1)
	go func() {
		r, err := post(t, srv.URL+"/x", "key-1", "op-1", `{}`)
		if err == nil {
			answered <- r
		}
		close(answered)
	}()
	require.Eventually(t, func() bool { return fake.EffectCount() == 1 }, 2*time.Second, 5*time.Millisecond)
	select {
	case <-answered:
		t.Fatal("answered while blocked")
	case <-time.After(50 * time.Millisecond):
	}

	// The key is in flight: the same key answers 409 and performs nothing.
	conflict := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	require.Equal(t, http.StatusConflict, conflict.status)
	require.Equal(t, 1, fake.EffectCount())

	close(release)
	r, ok := <-answered
	require.True(t, ok)
	require.Equal(t, http.StatusOK, r.status)

	// Cleared: the next POST answers at once.
	fake.SetBlock(nil)
	require.Equal(t, http.StatusOK, mustPost(t, srv.URL+"/x", "key-2", "op-2", `{}`).status)
}

func TestEffectHookSeesEachEffectBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{})
	var mu sync.Mutex
	var seen []string
	fake.EffectHook(func(e fakewebhook.Effect) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e.OpID)
	})
	mustPost(t, srv.URL+"/x", "", "op-1", `{}`)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"op-1"}, seen)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault       fakewebhook.Fault
		wantStatus  int // 0: the connection is dropped
		wantEffects int
	}{
		{fakewebhook.Fault{Kind: fakewebhook.FaultDropBeforeEffect}, 0, 0},
		{fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect}, 0, 1},
		{fakewebhook.Fault{Kind: fakewebhook.Fault500Stored}, 500, 0},
		{fakewebhook.Fault{Kind: fakewebhook.Fault500AfterEffect}, 500, 1},
		{fakewebhook.Fault{Kind: fakewebhook.Fault429, RetryAfter: 2 * time.Second}, 429, 0},
		{fakewebhook.Fault{Kind: fakewebhook.Fault409}, 409, 0},
		{fakewebhook.Fault{Kind: fakewebhook.FaultReject, Status: 422}, 422, 0},
		{fakewebhook.Fault{Kind: fakewebhook.FaultHangAfterEffect}, 200, 1},
	}
	for _, tt := range tests {
		t.Run(tt.fault.Kind.String(), func(t *testing.T) {
			t.Parallel()
			fake, srv := start(t, fakewebhook.Config{HangFor: 50 * time.Millisecond})
			fake.InjectFault(tt.fault)
			r, err := post(t, srv.URL+"/x", "key-1", "op-1", `{}`)
			if tt.wantStatus == 0 {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tt.wantStatus, r.status)
			}
			if tt.fault.Kind == fakewebhook.Fault429 {
				require.Equal(t, "2", r.header.Get("Retry-After"))
			}
			require.Equal(t, tt.wantEffects, fake.EffectCount())
			// The fault is spent.
			require.Equal(t, http.StatusOK, mustPost(t, srv.URL+"/x", "key-2", "op-2", `{}`).status)
		})
	}
}

func TestStored500IsReplayedUnderItsKey(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{HonourKeys: true})
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault500Stored})

	require.Equal(t, http.StatusInternalServerError, mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`).status)
	again := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	require.Equal(t, http.StatusInternalServerError, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Zero(t, fake.EffectCount())
	require.Equal(t, http.StatusOK, mustPost(t, srv.URL+"/x", "key-2", "op-1", `{}`).status)
}

func TestDropAfterEffectStoresTheAnswer(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{HonourKeys: true})
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})

	_, err := post(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	require.Error(t, err)
	again := mustPost(t, srv.URL+"/x", "key-1", "op-1", `{}`)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, fake.Effects()[0].ID, again.header.Get("X-Request-Id"))
	require.Equal(t, 1, fake.EffectCount())
}

func TestInvalidJSONPerformsNothing(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{})
	require.Equal(t, http.StatusBadRequest, mustPost(t, srv.URL+"/x", "", "op-1", `not json`).status)
	require.Zero(t, fake.EffectCount())
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{})
	fake.SetRandomFaults(map[fakewebhook.FaultKind]float64{fakewebhook.Fault429: 1}, 1)
	for range 3 {
		require.Equal(t, http.StatusTooManyRequests, mustPost(t, srv.URL+"/x", "", "op-1", `{}`).status)
	}
	fake.SetRandomFaults(nil, 0)
	require.Equal(t, http.StatusOK, mustPost(t, srv.URL+"/x", "", "op-1", `{}`).status)
	require.Equal(t, 1, fake.EffectCount())
	require.Equal(t, 4, fake.Requests())
}

func TestLookupHidesEffectsYoungerThanTheLag(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	fake, srv := start(t, fakewebhook.Config{LookupLag: time.Minute, Now: clk.Now})
	mustPost(t, srv.URL+"/x", "", "op-1", `{}`)

	lookup := func(op string) []map[string]any {
		resp, err := http.Get(srv.URL + "/_lookup?oncebox_op=" + op)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var page struct {
			Objects []map[string]any `json:"objects"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		require.NotNil(t, page.Objects)
		return page.Objects
	}
	require.Empty(t, lookup("op-1"))
	clk.Advance(time.Minute)
	objs := lookup("op-1")
	require.Len(t, objs, 1)
	require.Equal(t, fake.Effects()[0].ID, objs[0]["id"])
	require.Equal(t, "2025-03-01T12:00:00Z", objs[0]["created"])
	require.Equal(t, 200.0, objs[0]["status"], "the answer the POST got")
	require.Equal(t, map[string]any{"id": fake.Effects()[0].ID, "ok": true}, objs[0]["body"])
	require.Empty(t, lookup("op-2"))
}

func TestFetchEffects(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{})
	got, err := fakewebhook.FetchEffects(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	require.Empty(t, got)

	mustPost(t, srv.URL+"/a", "k", "op-1", `{"n":1}`)
	got, err = fakewebhook.FetchEffects(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	require.Len(t, got, 1)
	want := fake.Effects()[0]
	require.Equal(t, want.ID, got[0].ID)
	require.Equal(t, "op-1", got[0].OpID)
	require.JSONEq(t, `{"n":1}`, string(got[0].Body))
	require.True(t, want.At.Equal(got[0].At))
}

func TestRefusePrefixRefusesForGood(t *testing.T) {
	t.Parallel()
	fake, srv := start(t, fakewebhook.Config{HonourKeys: true, RefusePrefix: "/refused/"})
	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	for range 2 {
		got, err := post(t, srv.URL+"/refused/orders/1", "k1", "op1", `{"n":1}`)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, got.status)
		require.JSONEq(t, `{"error":"refused"}`, got.body)
	}
	require.Zero(t, fake.EffectCount())

	// Another path acts, and takes the fault the refused ones left.
	_, err := post(t, srv.URL+"/orders/1", "k2", "op2", `{"n":1}`)
	require.Error(t, err, "the queued fault drops the answer")
	require.Equal(t, 1, fake.EffectCount())
}
