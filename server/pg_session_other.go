//go:build !linux

package server

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: keepalives alone
// find a dead peer there.
func setUserTimeout(uintptr, time.Duration) error { return nil }
