package vendorapi

import "errors"

// ErrInvalidArgs is matched by every *ValidationError.
var ErrInvalidArgs = errors.New("invalid tool arguments")

// ValidationError says which argument of a tool call is wrong and why.
type ValidationError struct {
	// Field is a dotted path into the request, such as "args.amount" or "args.to[2].email".
	Field string
	// Message is a human sentence fragment, such as "must be an integer greater than 0".
	Message string
	// Rule names the broken rule for a client to branch on, when it is one oncebox
	// sets rather than the tool's schema (such as "tag_argument"); "" otherwise.
	Rule string
}

// Error implements error.
func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalidArgs) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidArgs }
