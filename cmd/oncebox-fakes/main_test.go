package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCheckoutTargetsAreServed: every target examples/checkout/tools.yaml names is served
// by `oncebox-fakes --checkout` and answers its lookup path, and the example's README
// starts them that way.
func TestCheckoutTargetsAreServed(t *testing.T) {
	catalog, err := os.ReadFile("../../examples/checkout/tools.yaml")
	require.NoError(t, err)
	targets := regexp.MustCompile(`(?m)^  (\w+): \{base_url: (\S+), lookup_path: (\S+)\}`).FindAllStringSubmatch(string(catalog), -1)
	require.Len(t, targets, 3)
	readme, err := os.ReadFile("../../examples/checkout/README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "go run ./cmd/oncebox-fakes --checkout")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--checkout"}) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, tg := range targets {
		require.Eventually(t, func() bool {
			resp, err := http.Get(tg[2] + tg[3] + "?oncebox_op=0b6f3c1e-2d4a-4f7b-9c8e-5a1d2e3f4a5b")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && regexp.MustCompile(`"objects"`).Match(b)
		}, 10*time.Second, 50*time.Millisecond, "target %s at %s answers its lookup path", tg[1], tg[2])
	}
}
