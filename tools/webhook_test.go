package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

func TestDecodeWebhookValid(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		args string
		want protocol.WebhookArgs
	}{
		{"no body", `{"target":"crm","path":"/hooks/order"}`, protocol.WebhookArgs{Target: "crm", Path: "/hooks/order"}},
		{"object body and query", `{"target":"crm","path":"/v1/a?x=1&y=%2F","body":{"n":1.50,"s":"x"}}`,
			protocol.WebhookArgs{Target: "crm", Path: "/v1/a?x=1&y=%2F", Body: json.RawMessage(`{"n":1.50,"s":"x"}`)}},
		{"array body", `{"target":"crm","path":"/","body":[1,2]}`, protocol.WebhookArgs{Target: "crm", Path: "/", Body: json.RawMessage(`[1,2]`)}},
		{"string body", `{"target":"crm","path":"/a","body":"hi"}`, protocol.WebhookArgs{Target: "crm", Path: "/a", Body: json.RawMessage(`"hi"`)}},
		{"null body is absent", `{"target":"crm","path":"/a","body":null}`, protocol.WebhookArgs{Target: "crm", Path: "/a"}},
		{"dots inside a segment", `{"target":"crm","path":"/a..b/.x/..."}`, protocol.WebhookArgs{Target: "crm", Path: "/a..b/.x/..."}},
		{"longest path", `{"target":"crm","path":"/` + strings.Repeat("a", 2047) + `"}`, protocol.WebhookArgs{Target: "crm", Path: "/" + strings.Repeat("a", 2047)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tools.DecodeWebhook(json.RawMessage(tc.args))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeWebhookInvalid(t *testing.T) {
	t.Parallel()

	runInvalid(t, []invalidCase{
		{"target missing", `{"path":"/a"}`, "args.target", "is required"},
		{"target empty", `{"target":"","path":"/a"}`, "args.target", "is required"},
		{"target not string", `{"target":["crm"],"path":"/a"}`, "args.target", "must be a string"},
		{"path missing", `{"target":"crm"}`, "args.path", "is required"},
		{"path empty", `{"target":"crm","path":""}`, "args.path", "is required"},
		{"path relative", `{"target":"crm","path":"hooks"}`, "args.path", `must start with "/"`},
		{"path is a URL", `{"target":"crm","path":"https://evil.example/x"}`, "args.path", `must start with "/"`},
		{"path scheme-relative", `{"target":"crm","path":"//evil.example/x"}`, "args.path", `must not start with "//"`},
		{"path dot-dot", `{"target":"crm","path":"/a/../admin"}`, "args.path", `".." segments`},
		{"path trailing dot-dot", `{"target":"crm","path":"/a/.."}`, "args.path", `".." segments`},
		{"path dot-dot before query", `{"target":"crm","path":"/..?x=1"}`, "args.path", `".." segments`},
		{"path encoded dot-dot", `{"target":"crm","path":"/a/%2e%2E/admin"}`, "args.path", `".." segments`},
		{"path encoded slash dot-dot", `{"target":"crm","path":"/a%2f..%2fadmin"}`, "args.path", `".." segments`},
		{"path bad escape", `{"target":"crm","path":"/a%zz"}`, "args.path", "percent-encoding"},
		{"path backslash", `{"target":"crm","path":"/\\evil.example"}`, "args.path", "backslashes"},
		{"path space", `{"target":"crm","path":"/a b"}`, "args.path", "spaces"},
		{"path newline", `{"target":"crm","path":"/a\nb"}`, "args.path", "control characters"},
		{"path fragment", `{"target":"crm","path":"/a#b"}`, "args.path", "fragment"},
		{"path too long", `{"target":"crm","path":"/` + strings.Repeat("a", 2048) + `"}`, "args.path", "at most 2048 characters"},
		{"unknown field", `{"target":"crm","path":"/a","method":"DELETE"}`, "args.method", "unknown field; allowed: target, path, body"},
	}, func(args json.RawMessage) error {
		_, err := tools.DecodeWebhook(args)
		return err
	})
}
