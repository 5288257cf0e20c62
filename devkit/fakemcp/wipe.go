package fakemcp

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wipe is one wipe_mailbox run the fake recorded (OfferWipe): the gated tool's side
// effect, which a test counts.
type Wipe struct {
	ID      string `json:"id"`
	Ref     string `json:"ref,omitempty"`
	Mailbox string `json:"mailbox"`
	Reason  string `json:"reason,omitempty"`
	// OpID and Key are the call's _meta op id and idempotency key, if it had them.
	OpID string `json:"-"`
	Key  string `json:"-"`
}

// WipeArgs are wipe_mailbox's arguments.
type WipeArgs struct {
	Mailbox string `json:"mailbox" jsonschema:"the mailbox to wipe"`
	Reason  string `json:"reason,omitempty" jsonschema:"why"`
	Ref     string `json:"ref,omitempty" jsonschema:"a reference the wipe is tagged with"`
}

// FoundWipes is find_wipe's answer.
type FoundWipes struct {
	Objects []Wipe `json:"objects"`
}

// wipeAnnotations are wipe_mailbox's annotations as OfferWipe lists it: destructive.
func wipeAnnotations() *mcp.ToolAnnotations {
	t := true
	return &mcp.ToolAnnotations{DestructiveHint: &t}
}

// OfferWipe adds two tools to the fake: wipe_mailbox (destructiveHint, so a gated
// tool), which records a Wipe and deletes nothing (in native-keys mode it answers a
// key it carried out before with the wipe that key made, without acting again), and
// find_wipe (readOnlyHint), its lookup tool, which answers {"objects":[...]}, the wipes
// whose ref is its "ref" argument. Each open session is told
// (notifications/tools/list_changed). Reannotate knows wipe_mailbox once it is offered.
// The random faults stay send_mail's; GarbageNext and GarbageEvery apply to wipe_mailbox
// as to any tool.
func (s *Server) OfferWipe() {
	s.addWipe(wipeAnnotations())
	f := false
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "find_wipe", Description: "Find the wipes made with a ref.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &f}}, s.findWipe)
}

func (s *Server) addWipe(ann *mcp.ToolAnnotations) {
	s.mu.Lock()
	s.wipeOffered = true
	s.mu.Unlock()
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "wipe_mailbox", Description: "Wipe a mailbox.", Annotations: ann}, s.wipeMailbox)
}

func (s *Server) wipeMailbox(_ context.Context, req *mcp.CallToolRequest, a WipeArgs) (*mcp.CallToolResult, Wipe, error) {
	key, _ := req.Params.Meta[MetaIdempotencyKey].(string)
	opID, _ := req.Params.Meta[MetaOpID].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.wipeKeys[key]; ok && s.native && key != "" {
		s.replays++
		return nil, prev, nil
	}
	w := Wipe{ID: "wipe_" + itoa(len(s.wipes)+1), Ref: a.Ref, Mailbox: a.Mailbox, Reason: a.Reason, OpID: opID, Key: key}
	s.wipes = append(s.wipes, w)
	if s.native && key != "" {
		s.wipeKeys[key] = w
	}
	return nil, w, nil
}

func (s *Server) findWipe(_ context.Context, _ *mcp.CallToolRequest, a FindArgs) (*mcp.CallToolResult, FoundWipes, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := FoundWipes{Objects: []Wipe{}}
	for _, w := range s.wipes {
		if w.Ref == a.Ref {
			out.Objects = append(out.Objects, w)
		}
	}
	return nil, out, nil
}

// Wipes returns the wipe_mailbox runs so far, in order.
func (s *Server) Wipes() []Wipe {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Wipe(nil), s.wipes...)
}
