package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663, 2026-07-28): a client
// that declares it in a tools/call's per-request capabilities gets, for a call that
// records an op, a task whose id is the op's id instead of the tool result; tasks/get
// reads the op, tasks/cancel rejects an op still waiting for a person. The SDK (v1.8.0)
// does not implement the extension: the tools/call side is a receiving middleware, the
// tasks/* methods are answered in front of the SDK's HTTP handler (HTTPHandler only).
const (
	ExtensionTasks = "io.modelcontextprotocol/tasks"
	// metaClientCapabilities is the _meta key of a request's per-request capabilities.
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// taskPollInterval is the pollIntervalMs every task suggests.
	taskPollInterval = 1000
	// cancelReason is the reason recorded on an op a tasks/cancel rejected; it marks
	// the task cancelled.
	cancelReason = "cancelled by the agent with MCP tasks/cancel"
)

// maxTaskBody is the largest body tasksFront reads to look for a tasks/* request.
const maxTaskBody = 64 << 10

// CodeTaskNotCancellable is the JSON-RPC error code of a tasks/cancel that came too
// late: the op was already released to be sent, or is settled.
const CodeTaskNotCancellable = -32012

// taskCallKey is the context key of a tool call made as a task.
type taskCallKey struct{}

// taskCall is filled by callTool with the op a task call recorded.
type taskCall struct{ op *outbox.Op }

// taskView is the Task shape of the extension, with a status's own fields.
type taskView struct {
	ResultType     string         `json:"resultType"`
	TaskID         string         `json:"taskId"`
	Status         string         `json:"status"`
	StatusMessage  string         `json:"statusMessage,omitempty"`
	CreatedAt      string         `json:"createdAt"`
	LastUpdatedAt  string         `json:"lastUpdatedAt"`
	TTLMs          *int64         `json:"ttlMs"`
	PollIntervalMs int            `json:"pollIntervalMs"`
	InputRequests  map[string]any `json:"inputRequests,omitempty"`
	Result         any            `json:"result,omitempty"`
}

// createTaskResult answers a tools/call with a task (resultType "task"). It embeds
// the call's result only to be an mcp.Result; its JSON is the task alone.
type createTaskResult struct {
	*mcp.CallToolResult
	task taskView
}

// MarshalJSON writes the task.
func (r *createTaskResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.task) }

// declaresTasks says whether a request's client declared the tasks extension: in the
// request's own capabilities (_meta), or, for a session, at initialize.
func declaresTasks(req *mcp.CallToolRequest) bool {
	if caps, ok := req.Params.Meta[metaClientCapabilities].(map[string]any); ok {
		if ext, ok := caps["extensions"].(map[string]any); ok {
			if _, ok := ext[ExtensionTasks]; ok {
				return true
			}
		}
	}
	if req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	_, ok := ip.Capabilities.Extensions[ExtensionTasks]
	return ok
}

// tasksMiddleware turns the result of a tools/call that declares the extension and
// recorded an op into a task of that op. Other calls are not touched.
func (s *Server) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || !declaresTasks(call) {
			return next(ctx, method, req)
		}
		tc := &taskCall{}
		res, err := next(context.WithValue(ctx, taskCallKey{}, tc), method, req)
		if err != nil || tc.op == nil {
			return res, err
		}
		tr, ok := res.(*mcp.CallToolResult)
		if !ok {
			return res, err
		}
		task := s.taskOf(tc.op)
		task.ResultType = "task"
		return &createTaskResult{CallToolResult: tr, task: task}, nil
	}
}

// taskOf is the task of op as it stands.
func (s *Server) taskOf(op *outbox.Op) taskView {
	t := taskView{ResultType: "complete", TaskID: op.ID, CreatedAt: op.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: op.UpdatedAt.UTC().Format(time.RFC3339Nano), PollIntervalMs: taskPollInterval}
	if op.UpdatedAt.IsZero() {
		t.LastUpdatedAt = t.CreatedAt
	}
	switch op.Status {
	case protocol.StatusSucceeded, protocol.StatusFailed:
		t.Status, t.Result = "completed", s.taskResult(op)
	case protocol.StatusRejected:
		if strings.Contains(string(op.Error), cancelReason) {
			t.Status, t.StatusMessage = "cancelled", "Cancelled with tasks/cancel before it was sent; nothing was carried out."
		} else {
			t.Status, t.Result = "completed", s.taskResult(op)
		}
	case protocol.StatusAwaitingApproval:
		t.Status, t.StatusMessage = "input_required", "Waiting for a person's approval; nothing has been carried out."
		t.InputRequests = map[string]any{}
		if link := s.approvalLink(op); link != "" {
			t.StatusMessage += " A person who approves for this account decides at " + link + "."
			t.InputRequests["approval-"+op.ID] = map[string]any{"method": "elicitation/create", "params": map[string]any{
				"mode": "url", "url": link, "message": "Approve or reject this " + actionOf(op.Tool) + " in the oncebox console.",
			}}
		}
	case protocol.StatusNeedsReview:
		t.Status, t.StatusMessage = "working", "Held for review by a person: "+reviewSentence(op)
	default:
		t.Status, t.StatusMessage = "working", "Recorded; the vendor has not confirmed it yet. It will be carried out at most once."
	}
	return t
}

// taskResult is the tool result of a settled op, as the call would have answered.
func (s *Server) taskResult(op *outbox.Op) *mcp.CallToolResult {
	return s.callResult(op.Tool, op.Args, callIdentity{Occurrence: 1}, &outbox.EnqueueResult{Op: op}, op)
}

// tasksFront answers the tasks/* methods of the extension, which the SDK does not
// know, for the request's tenant; every other request goes to next unread.
func (s *Server) tasksFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxTaskBody+1))
		if err != nil {
			http.Error(w, "the request body could not be read", http.StatusBadRequest)
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		if len(body) > maxTaskBody {
			next.ServeHTTP(w, r) // far larger than any tasks/* request
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !strings.HasPrefix(req.Method, "tasks/") || !req.IsCall() {
			next.ServeHTTP(w, r)
			return
		}
		res, jerr := s.taskMethod(r.Context(), req)
		out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: res, Error: jerr})
		if err != nil {
			http.Error(w, "the answer could not be encoded", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// taskMethod answers one tasks/* request of the authenticated tenant.
func (s *Server) taskMethod(ctx context.Context, req *jsonrpc.Request) (json.RawMessage, error) {
	info := auth.TokenInfoFromContext(ctx)
	tenantID, ok := tenantOf(info)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no authenticated tenant"}
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.taskId (a string) is required"}
	}
	if req.Method != "tasks/get" && req.Method != "tasks/cancel" && req.Method != "tasks/update" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not supported", req.Method)}
	}
	op, jerr := s.taskOp(ctx, tenantID, p.TaskID)
	if jerr != nil {
		return nil, jerr
	}
	switch req.Method {
	case "tasks/get":
		return json.Marshal(s.taskOf(op))
	case "tasks/cancel":
		tokenID, _ := info.Extra[tokenIDKey].(int64)
		if jerr := s.cancelTask(ctx, op, tokenID); jerr != nil {
			return nil, jerr
		}
	}
	// tasks/update: the only input a task asks for is a person's decision in the
	// console, which nothing an agent sends can stand for; responses are ignored.
	return json.RawMessage(`{"resultType":"complete"}`), nil
}

// taskOp returns the tenant's op of a task id; any other id (another tenant's op
// included) is the same "not found".
func (s *Server) taskOp(ctx context.Context, tenantID int64, taskID string) (*outbox.Op, *jsonrpc.Error) {
	notFound := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task not found: no task of this account has id " + fmt.Sprintf("%q", taskID)}
	if uuid.Validate(taskID) != nil {
		return nil, notFound
	}
	op, err := s.ob.GetByID(ctx, tenantID, taskID)
	if errors.Is(err, outbox.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		s.logger.LogAttrs(ctx, slog.LevelError, "mcp task lookup failed", slog.Any("error", err))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be read; retry later"}
	}
	return op, nil
}

// cancelTask rejects an op that still waits for a person (it was never sent), and
// refuses, saying so, when it is too late.
func (s *Server) cancelTask(ctx context.Context, op *outbox.Op, tokenID int64) *jsonrpc.Error {
	tooLate := func(op *outbox.Op) *jsonrpc.Error {
		data, _ := json.Marshal(map[string]string{"reason": "not_cancellable", "status": string(op.Status)})
		return &jsonrpc.Error{Code: CodeTaskNotCancellable, Data: data, Message: fmt.Sprintf(
			"too late to cancel: the op is %s; only an op still waiting for approval can be cancelled, since anything released may already have been sent", op.Status)}
	}
	if op.Status != protocol.StatusAwaitingApproval {
		if op.Status == protocol.StatusRejected && strings.Contains(string(op.Error), cancelReason) {
			return nil // already cancelled: the same request again changes nothing
		}
		return tooLate(op)
	}
	_, err := s.ob.Decide(ctx, outbox.Decision{TenantID: op.TenantID, Key: op.Key, Actor: fmt.Sprintf("agent token %d (tasks/cancel)", tokenID),
		Voter: "tasks/cancel", TokenID: tokenID, Role: "agent", Reason: cancelReason})
	if errors.Is(err, outbox.ErrWrongState) {
		if cur, gerr := s.ob.GetByID(ctx, op.TenantID, op.ID); gerr == nil {
			return tooLate(cur)
		}
		return tooLate(op)
	}
	if err != nil {
		s.logger.LogAttrs(ctx, slog.LevelError, "mcp task cancel failed", slog.Any("error", err))
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be cancelled now; retry later"}
	}
	return nil
}
