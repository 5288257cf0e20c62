package fakestripe

import (
	"encoding/json"
	"net/http"
)

// Stripe's error types, as stripe-go names them.
const (
	typeAPI            = "api_error"
	typeCard           = "card_error"
	typeIdempotency    = "idempotency_error"
	typeInvalidRequest = "invalid_request_error"
)

// apiError is the "error" object of a Stripe error answer.
type apiError struct {
	status int

	Type          string             `json:"type"`
	Code          string             `json:"code,omitempty"`
	DeclineCode   string             `json:"decline_code,omitempty"`
	Message       string             `json:"message"`
	Param         string             `json:"param,omitempty"`
	Charge        string             `json:"charge,omitempty"`
	PaymentIntent *paymentIntentJSON `json:"payment_intent,omitempty"`
	DocURL        string             `json:"doc_url,omitempty"`
}

// result encodes e as {"error": e} under its HTTP status.
func (e *apiError) result() result {
	res := jsonResult(struct {
		Error *apiError `json:"error"`
	}{e})
	res.status = e.status
	return res
}

// invalidParam returns the 400 invalid_request_error for a bad parameter.
func invalidParam(param, code, message string) *apiError {
	return &apiError{
		status:  http.StatusBadRequest,
		Type:    typeInvalidRequest,
		Code:    code,
		Param:   param,
		Message: message,
	}
}

// resourceMissing returns the error for an id that names no object.
func resourceMissing(status int, param, object, id string) *apiError {
	quoted, _ := json.Marshal(id)
	return &apiError{
		status:  status,
		Type:    typeInvalidRequest,
		Code:    "resource_missing",
		Param:   param,
		Message: "No such " + object + ": " + "'" + string(quoted[1:len(quoted)-1]) + "'",
	}
}
