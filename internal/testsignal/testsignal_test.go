package testsignal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHookIsANoOpUntilArmed(t *testing.T) {
	t.Parallel()
	var h Hook
	h.Reached() // the zero value, as in production: nothing happens
	n := 0
	h.Arm(func() { n++ })
	h.Reached()
	h.Reached()
	require.Equal(t, 2, n)
	h.Arm(nil)
	h.Reached()
	require.Equal(t, 2, n)
}
