package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/protocol"
)

// ExampleAgentSession_Key shows that a session mints the same key for the same tool
// call every time, so a retry of the call (by the agent, its framework or this client)
// is recognised by oncebox as the same op.
func ExampleAgentSession_Key() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8080", Token: "obx_example"})
	if err != nil {
		panic(err)
	}
	s := c.Session("conversation-42")
	first := s.Key("call_abc")
	retry := c.Session("conversation-42").Key("call_abc")
	other := s.Key("call_def")
	fmt.Println(first == retry, first == other, len(first) <= 255)
	// Output: true false true
}

// ExampleProblem tells a refusal apart by its problem type, one of protocol's
// constants, and reads its extension members.
func ExampleProblem() {
	// A server that refuses every call as a reuse of its key with another payload.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(protocol.Problem{Type: protocol.ProblemKeyConflict,
			Title: protocol.ProblemTitle(protocol.ProblemKeyConflict), Status: http.StatusUnprocessableEntity,
			Detail: "The key was used with another payload.", StoredFingerprint: "aa11", GivenFingerprint: "bb22"})
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, Token: "obx_example"})
	if err != nil {
		panic(err)
	}

	_, err = c.CreateRefund(context.Background(), "order-1234-refund", protocol.RefundArgs{PaymentIntent: "pi_123"}, nil)
	var p *client.Problem
	if errors.As(err, &p) && p.Type == protocol.ProblemKeyConflict {
		fmt.Println(p.Status, p.StoredFingerprint, p.GivenFingerprint, errors.Is(err, client.ErrConflict))
	}
	// Output: 422 aa11 bb22 true
}
