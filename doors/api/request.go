package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// opRequest is the body of POST /v1/ops.
type opRequest struct {
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	ConversationID string          `json:"conversation_id"`
	ToolCallID     string          `json:"tool_call_id"`
}

// HeaderConversationID names the agent's conversation on POST /v1/ops, for clients
// that set headers more easily than body members.
const HeaderConversationID = "Oncebox-Conversation-Id"

// conversationHeader fills req's conversation_id from the Oncebox-Conversation-Id
// header, and refuses a body conversation_id that differs from it.
func conversationHeader(r *http.Request, req *opRequest) *protocol.Problem {
	h := strings.TrimSpace(r.Header.Get(HeaderConversationID))
	switch {
	case h == "":
		return nil
	case req.ConversationID == "":
		req.ConversationID = h
		return nil
	case req.ConversationID != h:
		return invalidArgs("conversation_id", "differs from the "+HeaderConversationID+" header; send one of them, or the same value in both")
	}
	return nil
}

// decisionRequest is the optional body of approve and reject.
type decisionRequest struct {
	Reason string `json:"reason"`
	// Fingerprint, when sent, must be the op's: the person decides about exactly the
	// call they were shown.
	Fingerprint string `json:"fingerprint"`
}

// resolveRequest is the body of POST /v1/ops/{key}/resolve: how a person settles an op
// in needs_review or unknown.
type resolveRequest struct {
	// Outcome is succeeded (the vendor holds VendorRef), failed (it did not happen and
	// must not be sent again) or resend (the vendor holds nothing; send it again).
	Outcome   string `json:"outcome"`
	VendorRef string `json:"vendor_ref"`
	// NewKey, with resend, moves the op to a fresh vendor key.
	NewKey bool   `json:"new_key"`
	Reason string `json:"reason"`
}

// headerKey returns the normalized Idempotency-Key header, or the problem to answer.
func headerKey(r *http.Request) (string, *protocol.Problem) {
	values := r.Header.Values("Idempotency-Key")
	if len(values) == 0 || len(values) == 1 && strings.TrimSpace(values[0]) == "" {
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemMissingKey,
			"Send an Idempotency-Key header: 1 to 255 visible ASCII characters that name this side effect, the same on every retry.")
		p.Rule = "missing"
		return "", p
	}
	if len(values) > 1 {
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidKey,
			fmt.Sprintf("Send exactly one Idempotency-Key header; this request has %d.", len(values)))
		p.Rule = "repeated"
		return "", p
	}
	key, p := normalizeKey(values[0])
	if p == nil && protocol.MintedByMCP(key) {
		p = protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidKey,
			fmt.Sprintf("The idempotency key begins with %q or %q, which oncebox keeps for the keys its MCP server mints; choose another key.",
				protocol.MCPKeyPrefix, protocol.MCPWindowKeyPrefix))
		p.Rule = "reserved"
		return "", p
	}
	return key, p
}

// pathKey returns the normalized key the path names, recorded for the request's
// log line, or the problem to answer.
func pathKey(r *http.Request) (string, *protocol.Problem) {
	key, p := normalizeKey(r.PathValue("key"))
	if p == nil {
		recorderOf(r).key = key
	}
	return key, p
}

// normalizeKey checks a key from a header or a path.
func normalizeKey(raw string) (string, *protocol.Problem) {
	key, err := protocol.NormalizeKey(raw)
	var ke *protocol.KeyError
	if errors.As(err, &ke) {
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidKey, "The idempotency key "+ke.Detail+".")
		p.Rule = ke.Rule
		return "", p
	}
	if err != nil {
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidKey, "The idempotency key is malformed.")
		p.Rule = "invalid"
		return "", p
	}
	return key, nil
}

// parseWait reads ?wait=: a Go duration ("30s") or whole seconds ("30"), capped at max.
func parseWait(r *http.Request, limit time.Duration) (time.Duration, *protocol.Problem) {
	raw := r.URL.Query().Get("wait")
	if raw == "" {
		return 0, nil
	}
	bad := func(why string) (time.Duration, *protocol.Problem) {
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidWait,
			fmt.Sprintf("The wait parameter %q %s; send a duration such as \"30s\" or whole seconds such as \"30\" (at most %s).", raw, why, limit))
		p.Field = "wait"
		return 0, p
	}
	var d time.Duration
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		if n < 0 {
			return bad("is negative")
		}
		if n > int64(limit/time.Second) {
			return limit, nil
		}
		d = time.Duration(n) * time.Second
	} else {
		var err error
		if d, err = time.ParseDuration(raw); err != nil {
			return bad("is not a duration")
		}
		if d < 0 {
			return bad("is negative")
		}
	}
	return min(d, limit), nil
}

// checkJSONType refuses a body that is not declared as application/json.
func checkJSONType(r *http.Request) *protocol.Problem {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return nil
	}
	given := "no Content-Type"
	if ct != "" {
		given = fmt.Sprintf("Content-Type %q", ct)
	}
	return protocol.NewProblem(http.StatusUnsupportedMediaType, protocol.ProblemUnsupportedMediaType,
		"The request has "+given+"; send the body as JSON with \"Content-Type: application/json\".")
}

// readBody reads a body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *protocol.Problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, protocol.NewProblem(http.StatusRequestEntityTooLarge, protocol.ProblemPayloadTooLarge,
			fmt.Sprintf("The request body exceeds the limit of %d bytes.", mbe.Limit))
	}
	if err != nil {
		return nil, protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON, "The request body could not be read: "+err.Error()+".")
	}
	return body, nil
}

// readJSON reads the body into dst: declared as application/json, at most limit
// bytes, one JSON object with no unknown members.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) *protocol.Problem {
	if p := checkJSONType(r); p != nil {
		return p
	}
	body, p := readBody(w, r, limit)
	if p != nil {
		return p
	}
	return decodeStrict(body, dst)
}

// decodeStrict decodes one JSON object into dst, refusing unknown members and
// trailing data.
func decodeStrict(body []byte, dst any) *protocol.Problem {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON, "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON, "The request body must hold one JSON object and nothing after it.")
	}
	return nil
}

// jsonProblem explains a decoding error, naming the member when it can.
func jsonProblem(err error) *protocol.Problem {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON,
			fmt.Sprintf("The request body is not valid JSON (at byte %d: %s).", syntax.Offset, syntax.Error()))
	case errors.As(err, &typ):
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON,
			fmt.Sprintf("The member %q must be a JSON %s, not %s.", typ.Field, typ.Type.Kind(), typ.Value))
		p.Field = typ.Field
		return p
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON,
			fmt.Sprintf("The member %q is not part of this request; leave it out.", name))
		p.Field = name
		return p
	case errors.Is(err, io.ErrUnexpectedEOF):
		return protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON, "The request body is not valid JSON (it ends too early).")
	}
	return protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidJSON, "The request body is not valid JSON.")
}

// validationProblem is the invalid-args problem of an *vendorapi.ValidationError.
func validationProblem(err error) *protocol.Problem {
	var ve *vendorapi.ValidationError
	if errors.As(err, &ve) {
		p := invalidArgs(ve.Field, ve.Message)
		p.Rule = ve.Rule
		return p
	}
	return invalidArgs("args", "cannot be stored")
}

func invalidArgs(field, message string) *protocol.Problem {
	p := protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidArgs, "The tool call is invalid: "+field+" "+message+".")
	p.Field = field
	return p
}
