package outbox

import (
	"errors"
	"fmt"
)

var (
	// ErrKeyConflict is returned when an idempotency key is reused with another payload.
	// The error is a *KeyConflictError carrying both fingerprints.
	ErrKeyConflict = errors.New("idempotency key reused with a different payload")
	// ErrUnknownTool is returned for a tool name the registry does not know.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrInvalidArgs is matched by every *ValidationError.
	ErrInvalidArgs = errors.New("invalid tool arguments")
	// ErrNotFound is returned when an op does not exist for the tenant asking.
	ErrNotFound = errors.New("op not found")
	// ErrWrongState is returned when an op is not in the state an action needs.
	ErrWrongState = errors.New("op is not in the state this action needs")
)

// KeyConflictError is the error for a key reused with another payload.
type KeyConflictError struct {
	Key string
	// Stored is the fingerprint of the op already stored under the key.
	Stored Fingerprint
	// Given is the fingerprint of the refused request.
	Given Fingerprint
}

// Error implements error.
func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("idempotency key %q was first used with payload fingerprint %s; this request has %s", e.Key, e.Stored, e.Given)
}

// Is makes errors.Is(err, ErrKeyConflict) true.
func (e *KeyConflictError) Is(target error) bool { return target == ErrKeyConflict }

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

// UnknownToolError names a tool the registry does not know.
type UnknownToolError struct {
	Name  string
	Known []string
}

// Error implements error.
func (e *UnknownToolError) Error() string {
	return fmt.Sprintf("unknown tool %q; known tools: %v", e.Name, e.Known)
}

// Is makes errors.Is(err, ErrUnknownTool) true.
func (e *UnknownToolError) Is(target error) bool { return target == ErrUnknownTool }
