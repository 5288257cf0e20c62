package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// Settle is how long to keep asking the lookup path after the calls of a scenario
	// (a target may act after it answered, or list an object late). Defaults to 3
	// seconds.
	Settle time.Duration
	// Timeout bounds each request. Defaults to 10 seconds.
	Timeout time.Duration
}

// Scenario is what one retry scenario of Check saw.
type Scenario struct {
	// Name says what was sent.
	Name string `json:"name"`
	// OpID is the op id the calls were tagged with (Oncebox-Op), made up for the check.
	OpID string `json:"op_id"`
	// Calls is how many requests were sent.
	Calls int `json:"calls"`
	// Answers are what the calls got: "2xx", the adapter's error code, or "dropped".
	Answers []string `json:"answers"`
	// Objects is how many objects the lookup path lists for OpID; -1 when it could
	// not be asked (the target has no lookup_path).
	Objects int `json:"objects"`
}

// CheckReport is the result of Check.
type CheckReport struct {
	Tool   string     `json:"tool"`
	Target string     `json:"target"`
	Runs   []Scenario `json:"scenarios"`
	// NativeKeys is the target's native_keys in the file.
	NativeKeys bool `json:"native_keys"`
	// NativeKeysSafe says whether native_keys: true is safe for the target: every
	// scenario that reused one key made one object. Nil when it could not be checked
	// (no lookup_path to count the objects with).
	NativeKeysSafe *bool `json:"native_keys_safe"`
	// LookupFindsDropped says whether the lookup path listed the call whose answer was
	// dropped; nil without a lookup_path.
	LookupFindsDropped *bool `json:"lookup_finds_dropped"`
	// Verdicts are the sentences to print.
	Verdicts []string `json:"verdicts"`
	// Unchecked says what the check could not find out, and why.
	Unchecked []string `json:"unchecked,omitempty"`
}

// Contradiction returns the sentence saying how the verdict contradicts the file, or
// "" when it does not: the file says native_keys: true and a reused key made other
// than one object. `oncebox tools check` then exits non-zero.
func (rep *CheckReport) Contradiction() string {
	if rep.NativeKeys && rep.NativeKeysSafe != nil && !*rep.NativeKeysSafe {
		return fmt.Sprintf("the file says native_keys: true for target %s, but a reused key made other than one object there: set native_keys: false (oncebox then reconciles through lookup_path), or fix the target", rep.Target)
	}
	return ""
}

// Check runs the retry scenarios a team should run before trusting a write or unsafe
// tool, against the real target (so only against a test environment): the same call
// twice with one key, twice at once with one key, and once with its answer dropped
// (the connection closed once the request is written) then resent with the same key;
// after each, it counts the objects the target made through the target's lookup path.
// A target without a lookup path is sent the same calls, and the report says what could
// not be checked without one (CheckReport.Unchecked).
func (r *Runtime) Check(ctx context.Context, name string, args json.RawMessage, opts CheckOptions) (*CheckReport, error) {
	if opts.Settle <= 0 {
		opts.Settle = 3 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	c, err := r.newCheckRun(ctx, name, args, opts)
	if err != nil {
		return nil, err
	}
	droppedSeen, err := c.scenarios()
	if err != nil {
		return nil, err
	}
	c.verdicts(droppedSeen)
	return c.rep, nil
}

// checkRun is one Check of one tool: the request its arguments make and the two
// adapters that send it, one of them dropping every answer.
type checkRun struct {
	ctx      context.Context
	name     string
	target   string
	req      json.RawMessage
	plain    *webhook.Vendor
	dropping *webhook.Vendor
	// canCount says the target has a lookup path to count objects with.
	canCount bool
	settle   time.Duration
	rep      *CheckReport
}

// newCheckRun checks that the tool name can be checked with args and builds its
// adapters.
func (r *Runtime) newCheckRun(ctx context.Context, name string, args json.RawMessage, opts CheckOptions) (*checkRun, error) {
	t, ok := r.cat.Tools[name]
	if !ok {
		return nil, fmt.Errorf("%q is not a tool of %s", name, r.cat.File)
	}
	if t.Class == ClassRead {
		return nil, fmt.Errorf("%s is a read tool: it makes no op and is never retried with a key; nothing to check", name)
	}
	if t.Upstream != "" {
		return nil, fmt.Errorf("%s is a tool of the upstream MCP server %s: the check covers HTTP targets only", name, t.Upstream)
	}
	if len(t.Steps) > 0 {
		steps := make([]string, len(t.Steps))
		for i, s := range t.Steps {
			steps[i] = s.Name + " (" + s.Tool + ")"
		}
		return nil, fmt.Errorf("%s is a composite tool: it sends nothing of its own; check the catalog tools of its steps one by one: %s",
			name, strings.Join(steps, ", "))
	}
	target, ok := r.cat.Targets[t.Target]
	if !ok {
		return nil, fmt.Errorf("%s names no target of %s: the check covers HTTP targets only", name, r.cat.File)
	}
	if err := t.Validate(args); err != nil {
		return nil, fmt.Errorf("--args: %w", err)
	}
	req, err := t.request(args)
	if err != nil {
		return nil, err
	}
	wcfg := webhook.Config{
		Targets:           map[string]webhook.Target{t.Target: {BaseURL: target.BaseURL, SecretHeader: target.SecretHeader, Secret: target.Secret}},
		Timeout:           opts.Timeout,
		NativeIdempotency: target.NativeKeys,
		LookupPath:        target.LookupPath,
	}
	plain, err := webhook.New(wcfg)
	if err != nil {
		return nil, err
	}
	wcfg.HTTPClient = &http.Client{Timeout: opts.Timeout, Transport: dropAnswers{}, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	dropping, err := webhook.New(wcfg)
	if err != nil {
		return nil, err
	}
	return &checkRun{ctx: ctx, name: name, target: t.Target, req: req, plain: plain, dropping: dropping,
		canCount: target.LookupPath != "", settle: opts.Settle,
		rep: &CheckReport{Tool: name, Target: t.Target, NativeKeys: target.NativeKeys}}, nil
}

// count is how many objects the lookup path lists for opID, -1 without one.
func (c *checkRun) count(opID string) (int, error) {
	if !c.canCount {
		return -1, nil
	}
	return countObjects(c.ctx, c.plain, c.target, opID, c.settle)
}

// send sends the request once through v, and says what it got: "2xx", the adapter's
// error code, or "error".
func (c *checkRun) send(v *webhook.Vendor, opID, key string) string {
	_, err := v.Dispatch(c.ctx, vendorapi.DispatchParams{OpID: opID, Tool: c.name, Args: c.req, VendorKey: key, Attempt: 1})
	var de *vendorapi.DispatchError
	switch {
	case err == nil:
		return "2xx"
	case errors.As(err, &de):
		return de.Code
	default:
		return "error"
	}
}

// run runs one scenario under a fresh op id and key, and counts what it made.
func (c *checkRun) run(label string, calls func(opID, key string) []string) error {
	opID, key := "op_check_"+randomHex(), "check_"+randomHex()
	s := Scenario{Name: label, OpID: opID, Answers: calls(opID, key)}
	s.Calls = len(s.Answers)
	n, err := c.count(opID)
	if err != nil {
		return fmt.Errorf("%s: ask the lookup path: %w", label, err)
	}
	s.Objects = n
	c.rep.Runs = append(c.rep.Runs, s)
	return nil
}

// scenarios runs the three scenarios, and returns how many objects the lookup path
// listed for the dropped call alone, before its resend.
func (c *checkRun) scenarios() (droppedSeen int, err error) {
	if err := c.run("same key twice, one after the other", func(opID, key string) []string {
		return []string{c.send(c.plain, opID, key), c.send(c.plain, opID, key)}
	}); err != nil {
		return 0, err
	}
	if err := c.run("same key twice at once", func(opID, key string) []string {
		out := make([]string, 2)
		var wg sync.WaitGroup
		for i := range out {
			wg.Go(func() { out[i] = c.send(c.plain, opID, key) })
		}
		wg.Wait()
		return out
	}); err != nil {
		return 0, err
	}
	err = c.run("answer dropped, then resent with the same key", func(opID, key string) []string {
		first := c.send(c.dropping, opID, key)
		if first != "2xx" {
			first = "dropped (" + first + ")"
		}
		// What the lookup finds for the dropped call alone, before the resend.
		droppedSeen, _ = c.count(opID)
		return []string{first, c.send(c.plain, opID, key)}
	})
	return droppedSeen, err
}

// verdicts fills the report's verdicts, or says what could not be checked.
func (c *checkRun) verdicts(droppedSeen int) {
	rep := c.rep
	if !c.canCount {
		rep.Unchecked = append(rep.Unchecked,
			fmt.Sprintf("whether native_keys: true is safe for %s: the target has no lookup_path, so the objects each scenario made could not be counted (the answers above are all there is)", c.target),
			"whether a lookup finds a call whose answer was dropped: without a lookup_path, unknown outcomes of this tool go to needs_review")
		return
	}
	safe := true
	for _, s := range rep.Runs {
		if s.Objects != 1 {
			safe = false
		}
	}
	found := droppedSeen >= 1
	rep.NativeKeysSafe, rep.LookupFindsDropped = &safe, &found
	if safe {
		rep.Verdicts = append(rep.Verdicts, fmt.Sprintf("native_keys: true is safe for %s: every scenario that reused a key made one object.", c.target))
	} else {
		rep.Verdicts = append(rep.Verdicts, fmt.Sprintf("native_keys: true is NOT safe for %s: a reused key made other than one object (see above); keep native_keys: false and let oncebox reconcile through lookup_path.", c.target))
	}
	if found {
		rep.Verdicts = append(rep.Verdicts, fmt.Sprintf("the lookup path finds a dropped call: it listed %d object(s) for the call whose answer was lost, so the reconciler can settle such ops.", droppedSeen))
	} else {
		rep.Verdicts = append(rep.Verdicts, "the lookup path did NOT find the call whose answer was dropped (or the target did not act on it): unknown outcomes of this tool will go to needs_review.")
	}
}

// countObjects asks the lookup path for opID until the count stops changing for a
// while, at most settle.
func countObjects(ctx context.Context, v *webhook.Vendor, target, opID string, settle time.Duration) (int, error) {
	args := json.RawMessage(`{"target":"` + target + `"}`)
	deadline := time.Now().Add(settle)
	last, stable := -1, 0
	for {
		res, err := v.Lookup(ctx, vendorapi.LookupParams{OpID: opID, Args: args})
		if err != nil {
			return -1, err
		}
		n := len(res.Objects)
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		if (stable >= 2 && n > 0) || time.Now().After(deadline) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(settle / 10):
		}
	}
}

// dropAnswers is a transport that closes the connection as soon as the request is
// written, so the answer is lost: a timeout after the target may have acted.
type dropAnswers struct{}

// RoundTrip implements http.RoundTripper.
func (dropAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		// Leave the request a moment to reach the target's buffer, then hang up.
		time.AfterFunc(20*time.Millisecond, cancel)
	}}
	t := &http.Transport{DisableKeepAlives: true}
	defer t.CloseIdleConnections()
	resp, err := t.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err != nil {
		return nil, err
	}
	// An answer that came back within the moment is read and thrown away: it counts
	// as dropped too.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, errors.New("answer dropped by oncebox tools check")
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// String prints the report as a table and the verdicts.
func (rep *CheckReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "oncebox tools check %s (target %s)\n\n", rep.Tool, rep.Target)
	for _, s := range rep.Runs {
		objects := strconv.Itoa(s.Objects)
		if s.Objects < 0 {
			objects = "?"
		}
		fmt.Fprintf(&b, "  %-48s objects made: %s   answers: %s\n", s.Name, objects, strings.Join(s.Answers, ", "))
	}
	b.WriteString("\n")
	for _, v := range rep.Verdicts {
		b.WriteString("verdict: " + v + "\n")
	}
	for _, u := range rep.Unchecked {
		b.WriteString("not checked: " + u + "\n")
	}
	if c := rep.Contradiction(); c != "" {
		b.WriteString("contradiction: " + c + "\n")
	}
	return b.String()
}
