package outbox_test

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
)

func TestFingerprintIgnoresSpelling(t *testing.T) {
	t.Parallel()
	a, err := outbox.ComputeFingerprint("stripe.payment_intent", json.RawMessage(`{"amount":1000,"currency":"usd","metadata":{"a":"1","b":"2"}}`))
	require.NoError(t, err)
	b, err := outbox.ComputeFingerprint("stripe.payment_intent", json.RawMessage("{\n \"currency\" : \"usd\", \"metadata\": {\"b\":\"2\",\"a\":\"1\"},\n \"amount\": 1e3 }"))
	require.NoError(t, err)
	require.Equal(t, a, b, "key order, white space and number spelling do not matter")

	c, err := outbox.ComputeFingerprint("stripe.payment_intent", json.RawMessage(`{"amount":1001,"currency":"usd","metadata":{"a":"1","b":"2"}}`))
	require.NoError(t, err)
	require.NotEqual(t, a, c)
	d, err := outbox.ComputeFingerprint("stripe.refund", json.RawMessage(`{"amount":1000,"currency":"usd","metadata":{"a":"1","b":"2"}}`))
	require.NoError(t, err)
	require.NotEqual(t, a, d, "the tool is part of the fingerprint")
	require.Len(t, a.String(), 64)
}

// TestCanonicalJSONRFC8785 pins the canonicalization on the examples of RFC 8785.
func TestCanonicalJSONRFC8785(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		// RFC 8785 section 3.2.2 (sorting and numbers) example.
		{`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 section 3.2.3 (sorting of properties by UTF-16 code units).
		{`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
	}
	for _, tc := range cases {
		got, err := jcs.Transform([]byte(tc.in))
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got))
	}
	// And the fingerprint is the SHA-256 of exactly that canonical form.
	x, err := outbox.ComputeFingerprint("t", json.RawMessage(cases[0].in))
	require.NoError(t, err)
	y, err := outbox.ComputeFingerprint("t", json.RawMessage(cases[0].want))
	require.NoError(t, err)
	require.Equal(t, x, y)
}
