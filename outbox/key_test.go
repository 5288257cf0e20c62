package outbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

func TestNormalizeKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want, rule, text string
	}{
		{"abc", "abc", "", ""},
		{"  padded\t\n", "padded", "", ""},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), "", ""},
		{"!~", "!~", "", ""},
		{"", "", "missing", "is empty"},
		{" \t ", "", "missing", "is empty"},
		{strings.Repeat("k", 256), "", "too_long", "is 256 bytes long; the limit is 255"},
		{"inner space", "", "not_visible_ascii", "byte 5"},
		{"tab\there", "", "not_visible_ascii", "byte 3"},
		{"café", "", "not_visible_ascii", "not visible ASCII"},
		{"nul\x00", "", "not_visible_ascii", "byte 3"},
		{"del\x7f", "", "not_visible_ascii", "byte 3"},
	}
	for _, tc := range cases {
		got, err := protocol.NormalizeKey(tc.in)
		if tc.rule == "" {
			require.NoError(t, err, tc.in)
			require.Equal(t, tc.want, got)
			continue
		}
		var ke *protocol.KeyError
		require.ErrorAs(t, err, &ke, tc.in)
		require.Equal(t, tc.rule, ke.Rule)
		require.Contains(t, err.Error(), tc.text)
		require.ErrorIs(t, err, protocol.ErrInvalidKey)
	}
}

func TestVendorKeyIsDeterministicAndFits(t *testing.T) {
	t.Parallel()
	a := vendorapi.VendorKey(1, "k", "stripe.refund", 0)
	require.Equal(t, a, vendorapi.VendorKey(1, "k", "stripe.refund", 0))
	require.LessOrEqual(t, len(vendorapi.VendorKey(1, strings.Repeat("x", 255), "step", 99)), 255)
	for _, other := range []string{
		vendorapi.VendorKey(2, "k", "stripe.refund", 0),
		vendorapi.VendorKey(1, "k2", "stripe.refund", 0),
		vendorapi.VendorKey(1, "k", "stripe.payment_intent", 0),
		vendorapi.VendorKey(1, "k", "stripe.refund", 1),
		// No ambiguity from concatenation.
		vendorapi.VendorKey(1, "k\x00stripe.refund", "", 0),
	} {
		require.NotEqual(t, a, other)
	}
}
