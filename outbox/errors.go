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
	// ErrNotFound is returned when an op does not exist for the tenant asking.
	ErrNotFound = errors.New("op not found")
	// ErrWrongState is returned when an op is not in the state an action needs.
	ErrWrongState = errors.New("op is not in the state this action needs")
	// ErrUnknownTenant is returned by an enqueue for a tenant that does not exist;
	// nothing is recorded.
	ErrUnknownTenant = errors.New("unknown tenant")
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

// ErrNotOwned is matched by every *NotOwnedError.
var ErrNotOwned = errors.New("the object is not one of this tenant's")

// NotOwnedError refuses a call that names an existing object (Tool.Objects) which is
// not one of the tenant's: no op of the tenant made it, the tenant did not adopt it, and
// the vendor does not have it tagged with one of the tenant's ops. Nothing was recorded
// or sent.
type NotOwnedError struct {
	// Arg is the argument that names the object, such as "payment_intent".
	Arg string
	// ID is the object's id as the call gave it.
	ID string
}

// Error implements error.
func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s is not one of this tenant's objects", e.Arg, e.ID)
}

// Is makes errors.Is(err, ErrNotOwned) true.
func (e *NotOwnedError) Is(target error) bool { return target == ErrNotOwned }

// ErrObjectUnavailable is matched by every *ObjectUnavailableError.
var ErrObjectUnavailable = errors.New("the vendor could not be asked whose the object is")

// ObjectUnavailableError refuses a call whose object (Tool.Objects) the vendor had to
// be asked about (ObjectArg.Tag) and could not be: nothing was recorded or sent, and
// the same call may be sent again later.
type ObjectUnavailableError struct {
	// Arg is the argument that names the object.
	Arg string
	// ID is the object's id.
	ID string
	// Err is the vendor's error, free of secrets and of the vendor's message.
	Err error
}

// Error implements error.
func (e *ObjectUnavailableError) Error() string {
	return fmt.Sprintf("%s %s: the vendor could not be asked whose it is: %v", e.Arg, e.ID, e.Err)
}

// Unwrap returns the vendor's error.
func (e *ObjectUnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrObjectUnavailable) true.
func (e *ObjectUnavailableError) Is(target error) bool { return target == ErrObjectUnavailable }
