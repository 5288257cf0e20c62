package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/testkit/fakeclock"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

func lookupParams(opID, target string) vendorapi.LookupParams {
	return vendorapi.LookupParams{OpID: opID, Tool: "webhook.post", Args: json.RawMessage(`{"target":"` + target + `","path":"/x"}`)}
}

func TestLookupUnavailableWithoutLookupPath(t *testing.T) {
	t.Parallel()
	_, srv := startFake(t, fakewebhook.Config{})
	v := newVendor(t, srv.URL, nil)
	_, err := v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable)
	require.Zero(t, v.LookupLag())
	require.Equal(t, "webhook", v.Name())
	require.Equal(t, vendorapi.Idempotency{}, v.Idempotency())
}

func TestLookupFindsTaggedEffectsAfterTheLag(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	_, srv := startFake(t, fakewebhook.Config{LookupLag: time.Minute, Now: clk.Now})
	v := newVendor(t, srv.URL, func(c *webhook.Config) {
		c.LookupPath = "/_lookup"
		c.LookupLag = time.Minute
	})
	require.Equal(t, time.Minute, v.LookupLag())

	res, err := v.Dispatch(t.Context(), params("op-1", `{"target":"hooks","path":"/x"}`))
	require.NoError(t, err)

	// Too young to be seen.
	found, err := v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.NoError(t, err)
	require.Empty(t, found.Objects)

	clk.Advance(time.Minute)
	found, err = v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.NoError(t, err)
	require.Len(t, found.Objects, 1)
	obj := found.Objects[0]
	require.Equal(t, res.VendorRef, obj.ID)
	require.Equal(t, "op-1", obj.OpID)
	require.True(t, obj.Created.Equal(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)), obj.Created)
	require.JSONEq(t, string(res.Result), string(obj.Summary), "settled from the lookup, the op keeps the result a dispatch stores")

	// Another op has nothing.
	found, err = v.Lookup(t.Context(), lookupParams("op-2", "hooks"))
	require.NoError(t, err)
	require.Empty(t, found.Objects)
}

func TestLookupUnavailableAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get(secretHeader) != secret:
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/forbidden":
			w.WriteHeader(http.StatusForbidden)
		case r.URL.Path == "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case r.URL.Path == "/ok" && r.URL.Query().Get("oncebox_op") == "op-1":
			_, _ = w.Write([]byte(`{"objects":[{"id":"a","created":"2025-03-01T12:00:00.5Z"},{"id":"b","created":"2025-03-01T12:00:01Z"}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)

	for _, path := range []string{"/forbidden", "/missing"} {
		v := newVendor(t, srv.URL, func(c *webhook.Config) { c.LookupPath = path })
		_, err := v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
		require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable, path)
	}

	v := newVendor(t, srv.URL, func(c *webhook.Config) { c.LookupPath = "/broken" })
	_, err := v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.Error(t, err)
	require.False(t, errors.Is(err, vendorapi.ErrLookupUnavailable))

	// The secret header is sent: without it this answers 401.
	v = newVendor(t, srv.URL, func(c *webhook.Config) { c.LookupPath = "/ok" })
	found, err := v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.NoError(t, err)
	require.Len(t, found.Objects, 2)
	require.Equal(t, "a", found.Objects[0].ID)
	require.Equal(t, 500*time.Millisecond, found.Objects[1].Created.Sub(found.Objects[0].Created))

	// A target that is no longer configured cannot be asked.
	_, err = v.Lookup(t.Context(), lookupParams("op-1", "gone"))
	require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable)
}

// TestLookupObjectIsTheDispatchResultShape: the result of an op settled from a lookup
// has the shape of a dispatched op's, {"status":..,"body":..}: the object's own status
// and body when it gives them, else 200 and the object; a status that is not a 2xx is
// refused.
func TestLookupObjectIsTheDispatchResultShape(t *testing.T) {
	t.Parallel()
	answer := `{"objects":[{"id":"T-1","created":"2025-03-01T12:00:00Z","status":201,"body":{"ticket":"T-1"}},{"id":"T-2","created":"2025-03-01T12:00:00Z"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(answer)) }))
	t.Cleanup(srv.Close)
	v := newVendor(t, srv.URL, func(c *webhook.Config) { c.LookupPath = "/_lookup" })
	found, err := v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.NoError(t, err)
	require.Len(t, found.Objects, 2)
	require.JSONEq(t, `{"status":201,"body":{"ticket":"T-1"}}`, string(found.Objects[0].Summary))
	require.JSONEq(t, `{"status":200,"body":{"id":"T-2","created":"2025-03-01T12:00:00Z"}}`, string(found.Objects[1].Summary))

	answer = `{"objects":[{"id":"T-3","created":"2025-03-01T12:00:00Z","status":404}]}`
	_, err = v.Lookup(t.Context(), lookupParams("op-1", "hooks"))
	require.ErrorContains(t, err, "status 404 is not a 2xx")
}
