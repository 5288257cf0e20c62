//go:build !unix

package fakemcp

// lockState does not lock where flock is missing: one process per state file there.
func lockState(string) (func(), error) { return func() {}, nil }
