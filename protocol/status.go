package protocol

// Status is where an op stands in its life (the "status" of the HTTP API's op).
type Status string

// The states of an op. docs/architecture.md and the state diagram of
// docs/reliability.md show the transitions between them.
const (
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusRejected         Status = "rejected"
	StatusPending          Status = "pending"
	StatusDispatching      Status = "dispatching"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusUnknown          Status = "unknown"
	StatusNeedsReview      Status = "needs_review"
)

// Terminal reports whether the op's result is final and will be replayed as it is.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusRejected
}

// Settled reports whether nothing will happen to the op without a person: it is terminal,
// awaits approval, or needs review.
func (s Status) Settled() bool {
	return s.Terminal() || s == StatusNeedsReview || s == StatusAwaitingApproval
}
