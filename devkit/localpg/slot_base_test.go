//go:build unix

package localpg

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRootClustersBelongToTheirHome: as root, the default data folders lie in a folder
// of the invoking HOME's own under the temporary directory, not in one fixed folder per
// server user that every root (and every HOME) shares.
func TestRootClustersBelongToTheirHome(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the shared temporary folder is used only as root")
	}
	runAs := &osUser{name: "slottest" + strconv.FormatInt(time.Now().UnixNano(), 36), uid: 0, gid: 0}
	top := filepath.Join(os.TempDir(), "oncebox-localpg-"+runAs.name)
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	t.Setenv("HOME", "/home/alice")
	alice, err := slotBase(runAs, "15")
	require.NoError(t, err)
	t.Setenv("HOME", "/home/bob")
	bob, err := slotBase(runAs, "15")
	require.NoError(t, err)
	require.NotEqual(t, alice, bob, "two HOMEs never share a cluster")
	require.NotEqual(t, filepath.Join(top, "pg15"), alice, "not the one fixed folder")
	require.Equal(t, filepath.Join(top, ownerKey("/home/alice", 0), "pg15"), alice)
	require.NotContains(t, alice, "alice", "the path names no user")
	require.Equal(t, "uid-0", ownerKey("", 0))
}
