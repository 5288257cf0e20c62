package logdedupe_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/logdedupe"
)

func TestRepeatedErrorsAreRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(logdedupe.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), 200*time.Millisecond))
	down := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	for range 50 {
		log.Error("fetch failed", slog.Any("error", down))
		log.With(slog.String("queue", "q")).Error("fetch failed", slog.String("err", down.Error()))
		log.Info("request", slog.Int("status", 503))
	}
	log.Error("fetch failed", slog.Any("error", errors.New("another cause")))
	out := buf.String()
	require.Equal(t, 1, strings.Count(out, `dial tcp`), "one line for 100 identical failures (the error under \"error\" or \"err\")")
	require.Equal(t, 1, strings.Count(out, "another cause"))
	require.Equal(t, 50, strings.Count(out, "msg=request"), "lines below WARN are never dropped")

	time.Sleep(250 * time.Millisecond)
	log.Error("fetch failed", slog.Any("error", down))
	require.Contains(t, buf.String(), "repeated=99", "the next line after the window counts the dropped ones")
}
