package governance_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
)

// TestWindowAsPeopleWriteIt: a budget's window reads "1d" and "24h" alike, and is
// written without zero units.
func TestWindowAsPeopleWriteIt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "24h": 24 * time.Hour,
		"90m": 90 * time.Minute, " 1h30m ": 90 * time.Minute} {
		got, err := governance.ParseWindow(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "d", "-1d", "1.5d", "0d", "1w", "soon"} {
		_, err := governance.ParseWindow(bad)
		require.Error(t, err, bad)
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 48 * time.Hour: "2d", 7 * 24 * time.Hour: "7d", time.Hour: "1h",
		90 * time.Minute: "1h30m", 90 * time.Second: "1m30s", 25 * time.Hour: "25h", 30 * time.Second: "30s"} {
		require.Equal(t, want, governance.FormatWindow(d), d.String())
	}
}
