// Package client is a Go client of oncebox's HTTP API.
//
// A Client records tool calls as ops with POST /v1/ops, each under an idempotency key:
//
//	c, err := client.New(client.Config{BaseURL: "https://oncebox.internal", Token: "obx_..."})
//	res, err := c.CreateRefund(ctx, "order-1234-refund", protocol.RefundArgs{PaymentIntent: "pi_123", Amount: 500}, nil)
//	// res.Replayed says whether the op had been recorded by an earlier call.
//
// Failed connections, timeouts, 429 and 5xx answers are retried with the same key
// (Config.MaxRetries, exponential Config.Backoff, Retry-After honoured): the server
// makes the retry a replay, so the side effect still happens once. 4xx answers are not
// retried; they come back as a *Problem (the API's protocol.Problem, told apart by its
// Type, one of protocol's Problem* constants), which errors.Is matches against
// ErrConflict, ErrUnauthorized, ErrNotFound and ErrInvalid. Each attempt may take Config.Timeout
// (30 seconds by default) beyond the wait it asks the server for, so a long Opts.Wait
// is not cut short.
//
// Agent frameworks that give every tool call an id should use an AgentSession: it
// mints the key deterministically from the session and the tool call id, so a
// framework that re-runs the same tool call (after a crash, a timeout, a restart)
// sends the same key and gets the first call's op back:
//
//	s := c.Session(conversationID)
//	res, err := s.Call(ctx, toolCall.ID, toolCall.Name, toolCall.Arguments, nil)
package client
