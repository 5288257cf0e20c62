package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/catalog"
)

// TestClassify: the file comes first and annotations may only make a tool stricter:
// the file's class stands unless the upstream says destructiveHint; a file rule only
// an op has (approval without class) makes at least write; else readOnlyHint is read,
// destructiveHint unsafe, and anything else, missing annotations included, write,
// never read.
func TestClassify(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name string
		cfg  *catalog.UpstreamToolConfig
		ann  *mcp.ToolAnnotations
		want string
	}{
		{"no annotations", nil, nil, catalog.ClassWrite},
		{"empty annotations", nil, &mcp.ToolAnnotations{}, catalog.ClassWrite},
		{"read-only", nil, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassRead},
		{"destructive", nil, &mcp.ToolAnnotations{DestructiveHint: &yes}, catalog.ClassUnsafe},
		{"not destructive", nil, &mcp.ToolAnnotations{DestructiveHint: &no}, catalog.ClassWrite},
		{"file says write over read-only", &catalog.UpstreamToolConfig{Class: catalog.ClassWrite}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassWrite},
		{"file says unsafe", &catalog.UpstreamToolConfig{Class: catalog.ClassUnsafe}, nil, catalog.ClassUnsafe},
		{"file without class", &catalog.UpstreamToolConfig{}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassRead},
		{"file says read, upstream destructive: stricter", &catalog.UpstreamToolConfig{Class: catalog.ClassRead}, &mcp.ToolAnnotations{DestructiveHint: &yes}, catalog.ClassUnsafe},
		{"file says write, upstream destructive: stricter", &catalog.UpstreamToolConfig{Class: catalog.ClassWrite}, &mcp.ToolAnnotations{DestructiveHint: &yes}, catalog.ClassUnsafe},
		{"file says unsafe over read-only", &catalog.UpstreamToolConfig{Class: catalog.ClassUnsafe}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassUnsafe},
		{"file says read over no annotations", &catalog.UpstreamToolConfig{Class: catalog.ClassRead}, nil, catalog.ClassRead},
		{"approval without class over read-only: at least write", &catalog.UpstreamToolConfig{Approval: &governance.ApprovalRule{Mode: governance.ApprovalAlways}}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassWrite},
		{"tag argument without class over read-only: at least write", &catalog.UpstreamToolConfig{TagArgument: "ref"}, &mcp.ToolAnnotations{ReadOnlyHint: true}, catalog.ClassWrite},
		{"approval without class over destructive: unsafe", &catalog.UpstreamToolConfig{Approval: &governance.ApprovalRule{Mode: governance.ApprovalAlways}}, &mcp.ToolAnnotations{DestructiveHint: &yes}, catalog.ClassUnsafe},
	} {
		require.Equal(t, c.want, catalog.Classify(c.cfg, c.ann), c.name)
	}
}

// TestBrokenUpstreamNamesUpstreamAndField: upstream mistakes refuse to load, naming
// the upstream and the field.
func TestBrokenUpstreamNamesUpstreamAndField(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams: {mail: {}}", `upstream "mail": field url: set either url`},
		{"upstreams: {mail: {url: ftp://x}}", `upstream "mail": field url: must be an absolute http or https URL`},
		{`upstreams: {mail: {url: "http://x", headers: {Authorization: "Bearer ${NOPE_UNSET}"}}}`, `field headers: header Authorization: the environment variable NOPE_UNSET is not set`},
		{"upstreams: {mail: {command: x, headers: {A: b}}}", `field headers: headers are for an HTTP upstream`},
		{"upstreams: {mail: {command: x, tools: {send: {class: maybe}}}}", `field tools.send.class: "maybe" is not read, write or unsafe`},
		{"upstreams: {mail: {command: x, tools: {send: {lookup_tool: find}}}}", `field tools.send.lookup_tool: set both`},
		{"upstreams: {mail: {command: x, tools: {find: {class: read, tag_argument: ref}}}}", `field tools.find.class: a read tool makes no op`},
		{"upstreams: {mail: {command: x, workers: -1}}", `field workers: -1 is negative`},
		{"upstreams: {mail: {command: x, max_result_bytes: 10}}", `field max_result_bytes: 10 is less than 1024 bytes`},
		{"upstreams: {mail: {command: x, tools: {send: {redact: {args: [a..b]}}}}}", `field tools.send.redact.args: "a..b" is not a dotted path`},
		{"upstreams: {mail: {command: x, tools: {send: {redact: {}}}}}", `field tools.send.redact: names no field`},
		{"upstreams: {mail: {command: x, tools: {find: {class: read, redact: {result: [x]}}}}}", `field tools.find.class: a read tool makes no op`},
		{"upstreams: {mail: {command: x, job_timeout: soon}}", `field job_timeout: "soon" is not a positive duration`},
		{"upstreams: {mail: {command: x, rate: {burst: 3}}}", `field rate.per_second: must be a positive number`},
		{"upstreams: {mail: {command: x, rate: {per_second: 1, burst: -1}}}", `field rate.burst: -1 is negative`},
		{"upstreams: {mail: {command: x, tools: {send: {tag_argumnt: ref}}}}", `tools.yaml: upstream "mail": field tools.send: unknown field "tag_argumnt" (did you mean "tag_argument"?)`},
		{"upstreams: {mail: {command: x, rate: {persecond: 1}}}", `tools.yaml: upstream "mail": field rate: unknown field "persecond" (did you mean "per_second"?)`},
		{"upstreams: {mail: {comand: x}}", `tools.yaml: upstream "mail": unknown field "comand" (did you mean "command"?)`},
	} {
		_, err := catalog.Parse("tools.yaml", []byte(c.yaml), func(string) string { return "" })
		require.ErrorContains(t, err, c.want, c.yaml)
	}
}

// TestUpstreamQueueAndRate: workers, job_timeout and rate are read; a rate without a
// burst gets one second's worth of calls.
func TestUpstreamQueueAndRate(t *testing.T) {
	c, err := catalog.Parse("tools.yaml", []byte(`
upstreams:
  mail: {command: x, workers: 3, job_timeout: 45s, rate: {per_second: 2.5}}
  files: {command: y}
`), nil)
	require.NoError(t, err)
	m := c.Upstreams["mail"]
	require.Equal(t, 3, m.Workers)
	require.Equal(t, 45*time.Second, m.JobTimeout)
	require.InDelta(t, 2.5, m.Rate, 0)
	require.Equal(t, 3, m.Burst)
	f := c.Upstreams["files"]
	require.Zero(t, f.Workers, "the webhook queue's")
	require.Zero(t, f.Rate, "no limit")
}

// TestUpstreamSecretsStayOutOfLogsAndErrors: a stdio program that prints its secret
// environment value to stderr and exits: the log line and the refusal to start hide
// the value.
func TestUpstreamSecretsStayOutOfLogsAndErrors(t *testing.T) {
	const secret = "s3cret-token-value"
	c, err := catalog.Parse("tools.yaml", []byte(`
upstreams:
  leaky:
    command: sh
    args: [-c, 'echo "my token is $TOKEN" >&2; exit 1']
    env: {TOKEN: "${LEAKY_TOKEN}"}
`), func(k string) string {
		if k == "LEAKY_TOKEN" {
			return secret
		}
		return ""
	})
	require.NoError(t, err)
	var logs syncBuffer
	_, err = c.Connect(catalog.Options{Timeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.Error(t, err)
	require.ErrorContains(t, err, `upstream "leaky"`)
	require.NotContains(t, err.Error(), secret)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "my token is [redacted]") }, 5*time.Second, 20*time.Millisecond, logs.String())
	require.Contains(t, logs.String(), "upstream=leaky")
	require.NotContains(t, logs.String(), secret)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestUpstreamRateLimitSharedByCalls: one limit per upstream for every call: a read
// waits for its slot; a dispatch about to be claimed is told how long to wait instead
// (vendorapi.Throttler) and takes no slot then.
func TestUpstreamRateLimitSharedByCalls(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(fakemcp.New().Handler())
	t.Cleanup(up.Close)
	c, err := catalog.Parse("tools.yaml", []byte(`
upstreams:
  mail: {url: `+up.URL+`, rate: {per_second: 2, burst: 1}}
`), nil)
	require.NoError(t, err)
	rt, err := c.Connect(catalog.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	ctx := context.Background()
	start := time.Now()
	for range 3 {
		_, err := rt.Read(ctx, "mail.count_mail", json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "3 reads at 2 a second, burst 1")
	var th vendorapi.Throttler
	for _, v := range rt.Vendors() {
		th, _ = v.(vendorapi.Throttler)
	}
	require.NotNil(t, th, "an upstream's vendor throttles")
	d := th.Throttle()
	require.Positive(t, d, "the reads took the slots")
	require.LessOrEqual(t, d, 500*time.Millisecond)
	time.Sleep(d)
	require.Zero(t, th.Throttle(), "a slot is free again")
}

// TestLiveSwapUpstreamQueueNeedsARestart: an upstream's workers or job_timeout change
// only on a restart (its queue is made at start); its rate changes on a swap.
func TestLiveSwapUpstreamQueueNeedsARestart(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(fakemcp.New().Handler())
	t.Cleanup(up.Close)
	file := func(extra string) *catalog.Runtime {
		t.Helper()
		c, err := catalog.Parse("tools.yaml", []byte("upstreams:\n  mail: {url: "+up.URL+extra+"}\n"), nil)
		require.NoError(t, err)
		rt, err := c.Connect(catalog.Options{Timeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(rt.Close)
		return rt
	}
	first := file(", workers: 2")
	live := catalog.NewLive(first)
	for _, extra := range []string{", workers: 3", ", workers: 2, job_timeout: 1m"} {
		err := live.Swap(file(extra))
		var ce *catalog.Error
		require.ErrorAs(t, err, &ce, extra)
		require.Equal(t, "workers", ce.Field)
		require.Same(t, first, live.Current())
	}
	next := file(", workers: 2, rate: {per_second: 5}")
	require.NoError(t, live.Swap(next))
	require.Same(t, next, live.Current())
}

// TestTagArgumentBelongsToOncebox: an upstream tool's tag_argument is left out of the
// schema the model sees (properties and required), a call that sets it is refused
// naming the field and the rule, and a tag_argument the tool's schema does not have is
// refused when the upstream's tools are listed.
func TestTagArgumentBelongsToOncebox(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(fakemcp.New().Handler())
	t.Cleanup(up.Close)
	connect := func(tools string) (*catalog.Runtime, error) {
		c, err := catalog.Parse("tools.yaml", []byte("upstreams:\n  mail:\n    url: "+up.URL+"\n    tools: "+tools+"\n"), nil)
		require.NoError(t, err)
		rt, err := c.Connect(catalog.Options{Timeout: 5 * time.Second})
		if err == nil {
			t.Cleanup(rt.Close)
		}
		return rt, err
	}
	rt, err := connect("{send_mail: {tag_argument: ref}}")
	require.NoError(t, err)
	send := rt.Catalog().Tools["mail.send_mail"]
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	require.NoError(t, json.Unmarshal(send.InputSchema, &schema))
	require.NotContains(t, schema.Properties, "ref", "the model never sees the tag argument")
	require.Contains(t, schema.Properties, "subject", "the other properties stay")
	require.NotContains(t, schema.Required, "ref")

	require.NoError(t, send.Validate(json.RawMessage(`{"to":"ann@example.com","subject":"Hi"}`)))
	err = send.Validate(json.RawMessage(`{"to":"ann@example.com","subject":"Hi","ref":"mine"}`))
	var ve *vendorapi.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "args.ref", ve.Field)
	require.Equal(t, catalog.RuleTagArgument, ve.Rule)
	require.Contains(t, ve.Message, "set by oncebox")

	_, err = connect("{send_mail: {tag_argument: reff}}")
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "tools.send_mail.tag_argument", ce.Field)
	require.ErrorContains(t, err, `tools.yaml: upstream "mail": field tools.send_mail.tag_argument: "reff" is not a property of the tool's input schema`)
}
