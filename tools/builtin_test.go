package tools_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// builtinTool returns the tool named name from Builtin(cfg).
func builtinTool(t *testing.T, cfg tools.Config, name string) vendorapi.Tool {
	t.Helper()
	for _, tool := range tools.Builtin(cfg) {
		if tool.Name == name {
			return tool
		}
	}
	require.FailNow(t, "tool not built", name)
	return vendorapi.Tool{}
}

func TestBuiltin(t *testing.T) {
	t.Parallel()

	got := tools.Builtin(tools.Config{})
	vendors := make(map[string]string, len(got))
	for _, tool := range got {
		vendors[tool.Name] = tool.Vendor
		require.NotNil(t, tool.Validate, tool.Name)
		require.Equal(t, vendorapi.DefaultTTL, tool.TTL, tool.Name)
	}
	require.Equal(t, map[string]string{
		protocol.ToolPaymentIntent: tools.VendorStripe,
		protocol.ToolRefund:        tools.VendorStripe,
		protocol.ToolMail:          tools.VendorSendGrid,
		protocol.ToolWebhookPost:   tools.VendorWebhook,
	}, vendors)

	reg, err := outbox.NewRegistry(got...)
	require.NoError(t, err, "the built-in tools must register")
	require.Equal(t, []string{protocol.ToolMail, protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolWebhookPost}, reg.Names())
}

func TestBuiltinValidate(t *testing.T) {
	t.Parallel()

	cfg := tools.Config{WebhookTargets: []string{"erp", "crm", "crm"}}
	for _, tc := range []struct {
		tool string
		args string
	}{
		{protocol.ToolPaymentIntent, `{"amount":1999,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","confirm":true}`},
		{protocol.ToolRefund, `{"payment_intent":"pi_1","amount":500,"reason":"requested_by_customer"}`},
		{protocol.ToolMail, `{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"Hi","text":"Hello"}`},
		{protocol.ToolWebhookPost, `{"target":"crm","path":"/orders/42","body":{"status":"shipped"}}`},
	} {
		t.Run(tc.tool+" valid", func(t *testing.T) {
			t.Parallel()
			require.NoError(t, builtinTool(t, cfg, tc.tool).Validate(json.RawMessage(tc.args)))
		})
	}

	t.Run("invalid args", func(t *testing.T) {
		t.Parallel()
		err := builtinTool(t, cfg, protocol.ToolPaymentIntent).Validate(json.RawMessage(`{"amount":10.5,"currency":"usd"}`))
		requireInvalid(t, err, "args.amount", "must be an integer greater than 0")
	})

	t.Run("unknown webhook target", func(t *testing.T) {
		t.Parallel()
		err := builtinTool(t, cfg, protocol.ToolWebhookPost).Validate(json.RawMessage(`{"target":"billing","path":"/x"}`))
		requireInvalid(t, err, "args.target", "is not an allowed webhook target; allowed: crm, erp")
	})

	t.Run("no webhook targets configured", func(t *testing.T) {
		t.Parallel()
		err := builtinTool(t, tools.Config{}, protocol.ToolWebhookPost).Validate(json.RawMessage(`{"target":"crm","path":"/x"}`))
		requireInvalid(t, err, "args.target", "no webhook targets are configured")
	})

	t.Run("webhook shape checked before target", func(t *testing.T) {
		t.Parallel()
		err := builtinTool(t, cfg, protocol.ToolWebhookPost).Validate(json.RawMessage(`{"target":"crm","path":"/../x"}`))
		requireInvalid(t, err, "args.path", `".." segments`)
	})

	t.Run("config slice is copied", func(t *testing.T) {
		t.Parallel()
		targets := []string{"crm"}
		tool := builtinTool(t, tools.Config{WebhookTargets: targets}, protocol.ToolWebhookPost)
		targets[0] = "evil"
		require.NoError(t, tool.Validate(json.RawMessage(`{"target":"crm","path":"/x"}`)))
		requireInvalid(t, tool.Validate(json.RawMessage(`{"target":"evil","path":"/x"}`)), "args.target", "allowed: crm")
	})
}

func TestBuiltinRefundApproval(t *testing.T) {
	t.Parallel()

	t.Run("threshold unset: never", func(t *testing.T) {
		t.Parallel()
		tool := builtinTool(t, tools.Config{}, protocol.ToolRefund)
		require.True(t, tool.NeedsApproval == nil || !tool.NeedsApproval(json.RawMessage(`{"payment_intent":"pi_1"}`)))
	})

	for _, tc := range []struct {
		name  string
		above int64
		args  string
		want  bool
	}{
		{"below", 10000, `{"payment_intent":"pi_1","amount":9999}`, false},
		{"at threshold", 10000, `{"payment_intent":"pi_1","amount":10000}`, false},
		{"above", 10000, `{"payment_intent":"pi_1","amount":10001}`, true},
		{"full refund", 10000, `{"charge":"ch_1"}`, true},
		{"negative threshold: every refund", -1, `{"charge":"ch_1","amount":1}`, true},
		{"invalid args: ask a person", 10000, `{"charge":"ch_1","amount":"1"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tool := builtinTool(t, tools.Config{RefundApprovalAbove: tc.above}, protocol.ToolRefund)
			require.NotNil(t, tool.NeedsApproval)
			require.Equal(t, tc.want, tool.NeedsApproval(json.RawMessage(tc.args)))
		})
	}

	t.Run("other tools never wait", func(t *testing.T) {
		t.Parallel()
		for _, tool := range tools.Builtin(tools.Config{RefundApprovalAbove: 1}) {
			if tool.Name != protocol.ToolRefund {
				require.Nil(t, tool.NeedsApproval, tool.Name)
			}
		}
	})
}

func TestBuiltinTTL(t *testing.T) {
	t.Parallel()

	cfg := tools.Config{TTL: map[string]time.Duration{protocol.ToolMail: time.Hour, protocol.ToolRefund: 0}}
	require.Equal(t, time.Hour, builtinTool(t, cfg, protocol.ToolMail).TTL)
	require.Equal(t, vendorapi.DefaultTTL, builtinTool(t, cfg, protocol.ToolRefund).TTL)
	require.Equal(t, vendorapi.DefaultTTL, builtinTool(t, cfg, protocol.ToolPaymentIntent).TTL)
}
