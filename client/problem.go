package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/oncebox/oncebox/protocol"
)

// Sentinels that errors.Is matches a *Problem against, by its HTTP status.
var (
	// ErrConflict matches 409 (the op is not in the state an action needs) and 422
	// (the idempotency key was already used with another payload).
	ErrConflict = errors.New("oncebox: conflict")
	// ErrUnauthorized matches 401: the token is missing, unknown or revoked.
	ErrUnauthorized = errors.New("oncebox: unauthorized")
	// ErrNotFound matches 404: no op under this key for the token's tenant. It does not
	// match a 404 of type no-route, which says the API serves nothing at the URL asked
	// (check Config.BaseURL).
	ErrNotFound = errors.New("oncebox: not found")
	// ErrInvalid matches 400, 413 and 415: the request is malformed (key, tool, args,
	// body).
	ErrInvalid = errors.New("oncebox: invalid request")
)

// Problem is the error of a refusal: the problem document the API answered
// (protocol.Problem, decoded as it is, extension members included), or one the client
// built for a request it refuses to send (an invalid key). errors.As finds it in an
// error a Client returns; errors.Is matches it against the sentinels above.
type Problem struct {
	protocol.Problem

	cause error
}

// Error implements error.
func (p *Problem) Error() string {
	msg := fmt.Sprintf("oncebox: %d %s", p.Status, p.Title)
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	if p.Field != "" {
		msg += " (field " + p.Field + ")"
	}
	return msg
}

// Is matches the sentinel of the problem's status.
func (p *Problem) Is(target error) bool {
	switch target {
	case ErrConflict:
		return p.Status == http.StatusConflict || p.Status == http.StatusUnprocessableEntity
	case ErrUnauthorized:
		return p.Status == http.StatusUnauthorized
	case ErrNotFound:
		return p.Status == http.StatusNotFound && p.Type != protocol.ProblemNoRoute
	case ErrInvalid:
		return p.Status == http.StatusBadRequest || p.Status == http.StatusRequestEntityTooLarge ||
			p.Status == http.StatusUnsupportedMediaType
	}
	return false
}

// Unwrap returns the local error a client-built problem stands for, if any.
func (p *Problem) Unwrap() error { return p.cause }
