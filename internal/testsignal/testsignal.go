// Package testsignal holds typed test signals, in the spirit of River's
// rivershared/testsignal: named points in production code where a test may step in
// (hold a group commit, revoke a token between a read and its use). A signal's zero
// value does nothing, so production code pays one atomic load per point and carries no
// exported test field; only a test arms one, through its package's export_test.go.
package testsignal

import "sync/atomic"

// Hook is a point a test may step in at. Reached runs, synchronously, the function a
// test armed with Arm; unarmed (the zero value, in production) it does nothing.
type Hook struct {
	f atomic.Pointer[func()]
}

// Arm makes Reached run f; nil disarms the hook.
func (h *Hook) Arm(f func()) {
	if f == nil {
		h.f.Store(nil)
		return
	}
	h.f.Store(&f)
}

// Reached runs the armed function, if any.
func (h *Hook) Reached() {
	if f := h.f.Load(); f != nil {
		(*f)()
	}
}
