package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/vendorapi"
)

// fakeReads is a Reader with three read tools: crm.find answers, crm.down fails,
// crm.strict refuses every argument but {"id": 1}.
type fakeReads struct{}

func (fakeReads) IsReadFor(_ int64, tool string) bool {
	return tool == "crm.find" || tool == "crm.down" || tool == "crm.strict"
}

func (fakeReads) Read(_ context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	switch tool {
	case "crm.down":
		return nil, errors.New("timeout: the target did not answer within 10s")
	case "crm.strict":
		if string(args) != `{"id":1}` {
			return nil, &vendorapi.ValidationError{Field: "args.id", Message: "breaks the input_schema rule required: missing property 'id'"}
		}
	}
	return json.RawMessage(`{"status":200,"body":{"found":true}}`), nil
}

// TestReadToolAnswersAtOnceWithoutOp: POST /v1/ops with a read tool needs no key,
// answers the target's reply and records no op; a refusal is 400 with the field.
func TestReadToolAnswersAtOnceWithoutOp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.Reads = fakeReads{} })
	_, token := e.newTenant(t, "acme")
	rec := e.post(token, "", `{"tool":"crm.find","args":{"q":"x"}}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"tool":"crm.find","result":{"status":200,"body":{"found":true}}}`, rec.Body.String())
	var ops int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Zero(t, ops, "a read tool records no op")

	rec = e.post(token, "", `{"tool":"crm.strict","args":{}}`)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"field":"args.id"`)
	require.Contains(t, rec.Body.String(), "required")

	rec = e.post(token, "", `{"tool":"crm.down","args":{}}`)
	require.Equal(t, http.StatusBadGateway, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "read-failed")

	// Other tools still need a key.
	rec = e.post(token, "", paymentBody)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "missing-idempotency-key")
}

// TestListTools: GET /v1/tools lists the configured tools with class and schema.
func TestListTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) {
		c.Tools = []api.ToolInfo{
			{Name: "webhook.post", Class: "write", Description: "Post.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "crm.find", Class: "read", Description: "Find.", InputSchema: json.RawMessage(`{"type":"object","required":["q"]}`)},
		}
	})
	_, token := e.newTenant(t, "acme")
	rec := e.do(req(http.MethodGet, "/v1/tools", token, "", ""))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"tools":[
		{"name":"crm.find","class":"read","description":"Find.","input_schema":{"type":"object","required":["q"]}},
		{"name":"webhook.post","class":"write","description":"Post.","input_schema":{"type":"object"}}]}`, rec.Body.String())
}
