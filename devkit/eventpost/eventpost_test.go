package eventpost_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/eventpost"
)

// receiver records the bodies it accepts, in order.
type receiver struct {
	mu     sync.Mutex
	bodies []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

func batch(body string) eventpost.Batch {
	return func(time.Time) ([]byte, http.Header) { return []byte(body), http.Header{} }
}

func waitIdle(t *testing.T, p *eventpost.Poster, delivered int) {
	t.Helper()
	require.Eventually(t, func() bool {
		pending, d, _ := p.Stats()
		return pending == 0 && d == delivered
	}, 10*time.Second, 10*time.Millisecond)
}

func TestReorderDuplicateAndFallback(t *testing.T) {
	t.Parallel()
	rec := &receiver{}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)
	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()

	// Every object's batches reversed and delivered twice, the first URL down.
	p := eventpost.New(eventpost.Config{URL: downURL, Fallbacks: []string{up.URL}, ReorderRate: 1, DuplicateRate: 1, Seed: 1})
	t.Cleanup(p.Close)
	p.Post(batch("created"), batch("succeeded"))
	waitIdle(t, p, 2)
	require.Equal(t, []string{"succeeded", "succeeded", "created", "created"}, rec.got())
}

func TestGivesUpAfterRetryFor(t *testing.T) {
	t.Parallel()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	t.Cleanup(refuse.Close)
	p := eventpost.New(eventpost.Config{URL: refuse.URL, RetryFor: 300 * time.Millisecond})
	t.Cleanup(p.Close)
	p.Post(batch("x"))
	require.Eventually(t, func() bool {
		pending, delivered, dropped := p.Stats()
		return pending == 0 && delivered == 0 && dropped == 1
	}, 10*time.Second, 10*time.Millisecond)
}

// fakeEvents is a fake's events configuration.
type fakeEvents struct {
	Secret string
}

func TestHolderPostsUnderTheConfigurationInForce(t *testing.T) {
	t.Parallel()
	rec := &receiver{}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)

	var h eventpost.Holder[fakeEvents]
	t.Cleanup(func() { h.Set(nil, eventpost.Config{}) })
	build := func(cfg *fakeEvents) []eventpost.Batch { return []eventpost.Batch{batch(cfg.Secret)} }
	require.False(t, h.Post(build), "events are off at first")
	require.Nil(t, h.Config())

	h.Set(&fakeEvents{Secret: "one"}, eventpost.Config{URL: up.URL})
	require.True(t, h.Post(build))
	require.Eventually(t, func() bool { _, delivered, _ := h.Stats(); return delivered == 1 }, 10*time.Second, 10*time.Millisecond)

	h.Set(&fakeEvents{Secret: "two"}, eventpost.Config{URL: up.URL})
	require.Equal(t, "two", h.Config().Secret)
	require.True(t, h.Post(build))
	require.Eventually(t, func() bool { _, delivered, _ := h.Stats(); return delivered == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"one", "two"}, rec.got())

	h.Set(nil, eventpost.Config{})
	require.False(t, h.Post(build))
	pending, delivered, dropped := h.Stats()
	require.Zero(t, pending+delivered+dropped)
}
