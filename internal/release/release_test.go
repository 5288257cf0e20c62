package release

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionIsBaseUnlessTheBuildSetsIt(t *testing.T) {
	require.Equal(t, Base, Version())
	version = "v9.9.9"
	t.Cleanup(func() { version = "" })
	require.Equal(t, "v9.9.9", Version())
}

func TestCommitOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, "unknown", commitOf(nil))
	require.Equal(t, "abc", commitOf([]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}))
	require.Equal(t, "abc-dirty", commitOf([]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}))
}
