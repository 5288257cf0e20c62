package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
)

// probe GETs url and returns its status and JSON body.
func probe(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

// TestProbesOfAWorkerOnlyProcess: a process without the API role serves /livez and
// /readyz on --health-addr (TestReadinessRefusals covers the refusals).
func TestProbesOfAWorkerOnlyProcess(t *testing.T) {
	t.Parallel()
	cfg, _ := newConfig(t)
	cfg.Roles = server.Roles{Worker: true, Periodic: true}
	cfg.HealthAddr = "127.0.0.1:0"
	srv, _ := runServer(t, context.Background(), cfg)
	base := "http://" + srv.HealthAddr().String()

	status, body := probe(t, base+"/readyz")
	require.Equal(t, http.StatusOK, status, body)
	status, _ = probe(t, base+"/livez")
	require.Equal(t, http.StatusOK, status)

}

// TestProbesOnTheAPIAddress: the API address serves the probes too, without a token.
func TestProbesOnTheAPIAddress(t *testing.T) {
	t.Parallel()
	base, _, _ := runAPI(t, nil)
	status, body := probe(t, base+"/readyz")
	require.Equal(t, http.StatusOK, status, body)
	status, _ = probe(t, base+"/livez")
	require.Equal(t, http.StatusOK, status)
}
