package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

func TestDecodePaymentIntentValid(t *testing.T) {
	t.Parallel()

	t.Run("minimal", func(t *testing.T) {
		t.Parallel()
		a, err := tools.DecodePaymentIntent(json.RawMessage(`{"amount":1,"currency":"usd"}`))
		require.NoError(t, err)
		require.Equal(t, protocol.PaymentIntentArgs{Amount: 1, Currency: "usd"}, a)
	})

	t.Run("full", func(t *testing.T) {
		t.Parallel()
		args := `{
			"amount": 99999999, "currency": "eur", "customer": "cus_Nf0a1B2c",
			"payment_method": "pm_card_visa", "confirm": true,
			"description": ` + quote(strings.Repeat("é", 1000)) + `,
			"metadata": ` + metadataJSON(49) + `
		}`
		a, err := tools.DecodePaymentIntent(json.RawMessage(args))
		require.NoError(t, err)
		require.Equal(t, int64(99999999), a.Amount)
		require.Equal(t, "eur", a.Currency)
		require.Equal(t, "cus_Nf0a1B2c", a.Customer)
		require.Equal(t, "pm_card_visa", a.PaymentMethod)
		require.True(t, a.Confirm)
		require.Len(t, a.Metadata, 49)
		require.Equal(t, "v", a.Metadata["k48"])
	})

	t.Run("metadata limits reached exactly", func(t *testing.T) {
		t.Parallel()
		key := strings.Repeat("k", 40)
		args := `{"amount":1,"currency":"usd","metadata":{` + quote(key) + `:` + quote(strings.Repeat("ü", 500)) + `,"empty":""}}`
		a, err := tools.DecodePaymentIntent(json.RawMessage(args))
		require.NoError(t, err)
		require.Len(t, a.Metadata[key], 1000) // 500 two-byte characters
		require.Contains(t, a.Metadata, "empty")
	})

	t.Run("confirm false", func(t *testing.T) {
		t.Parallel()
		a, err := tools.DecodePaymentIntent(json.RawMessage(`{"amount":1,"currency":"usd","confirm":false}`))
		require.NoError(t, err)
		require.False(t, a.Confirm)
	})

	t.Run("nulls are absent", func(t *testing.T) {
		t.Parallel()
		a, err := tools.DecodePaymentIntent(json.RawMessage(`{"amount":5,"currency":"usd","customer":null,"confirm":null,"metadata":null}`))
		require.NoError(t, err)
		require.Equal(t, protocol.PaymentIntentArgs{Amount: 5, Currency: "usd"}, a)
	})
}

func TestDecodePaymentIntentInvalid(t *testing.T) {
	t.Parallel()

	const positive = "must be an integer greater than 0"
	runInvalid(t, []invalidCase{
		{"amount missing", `{"currency":"usd"}`, "args.amount", "is required"},
		{"amount null", `{"amount":null,"currency":"usd"}`, "args.amount", "is required"},
		{"amount fraction", `{"amount":10.5,"currency":"usd"}`, "args.amount", "no fraction"},
		{"amount whole fraction", `{"amount":10.0,"currency":"usd"}`, "args.amount", "no fraction"},
		{"amount exponent", `{"amount":1e3,"currency":"usd"}`, "args.amount", positive},
		{"amount string", `{"amount":"10","currency":"usd"}`, "args.amount", "not a string"},
		{"amount bool", `{"amount":true,"currency":"usd"}`, "args.amount", positive},
		{"amount zero", `{"amount":0,"currency":"usd"}`, "args.amount", positive},
		{"amount negative", `{"amount":-1,"currency":"usd"}`, "args.amount", positive},
		{"amount minus zero", `{"amount":-0,"currency":"usd"}`, "args.amount", positive},
		{"amount too large", `{"amount":100000000,"currency":"usd"}`, "args.amount", "at most 99999999"},
		{"amount beyond int64", `{"amount":99999999999999999999,"currency":"usd"}`, "args.amount", "at most 99999999"},

		{"currency missing", `{"amount":1}`, "args.currency", "is required"},
		{"currency empty", `{"amount":1,"currency":""}`, "args.currency", "is required"},
		{"currency upper case", `{"amount":1,"currency":"USD"}`, "args.currency", "lower case"},
		{"currency too long", `{"amount":1,"currency":"usdt"}`, "args.currency", "three-letter"},
		{"currency non-ASCII", `{"amount":1,"currency":"üsd"}`, "args.currency", "three-letter"},
		{"currency number", `{"amount":1,"currency":840}`, "args.currency", "must be a string"},

		{"customer empty", `{"amount":1,"currency":"usd","customer":""}`, "args.customer", "must not be empty"},
		{"customer no prefix", `{"amount":1,"currency":"usd","customer":"alice"}`, "args.customer", `"cus_123"`},
		{"customer prefix only", `{"amount":1,"currency":"usd","customer":"cus_"}`, "args.customer", "customer id"},
		{"customer with space", `{"amount":1,"currency":"usd","customer":"cus_1 2"}`, "args.customer", "customer id"},
		{"customer not string", `{"amount":1,"currency":"usd","customer":42}`, "args.customer", "must be a string"},

		{"payment_method empty", `{"amount":1,"currency":"usd","payment_method":""}`, "args.payment_method", "must not be empty"},
		{"payment_method junk", `{"amount":1,"currency":"usd","payment_method":"pm/../x"}`, "args.payment_method", "payment method id"},
		{"confirm without payment_method", `{"amount":1,"currency":"usd","confirm":true}`, "args.payment_method", "required when confirm is true"},
		{"confirm string", `{"amount":1,"currency":"usd","confirm":"true"}`, "args.confirm", "true or false"},

		{"description too long", `{"amount":1,"currency":"usd","description":` + quote(strings.Repeat("x", 1001)) + `}`, "args.description", "at most 1000 characters"},
		{"description not string", `{"amount":1,"currency":"usd","description":["a"]}`, "args.description", "must be a string"},

		{"metadata not object", `{"amount":1,"currency":"usd","metadata":"a=b"}`, "args.metadata", "must be a JSON object"},
		{"metadata 50 keys", `{"amount":1,"currency":"usd","metadata":` + metadataJSON(50) + `}`, "args.metadata", "at most 49 keys"},
		{"metadata empty key", `{"amount":1,"currency":"usd","metadata":{"":"x"}}`, "args.metadata", "keys must not be empty"},
		{"metadata long key", `{"amount":1,"currency":"usd","metadata":{` + quote(strings.Repeat("k", 41)) + `:"x"}}`, "args.metadata." + strings.Repeat("k", 41), "at most 40 characters"},
		{"metadata bracket key", `{"amount":1,"currency":"usd","metadata":{"a[b]":"x"}}`, "args.metadata.a[b]", "square brackets"},
		{"metadata closing bracket key", `{"amount":1,"currency":"usd","metadata":{"ab]":"x"}}`, "args.metadata.ab]", "square brackets"},
		{"metadata reserved key", `{"amount":1,"currency":"usd","metadata":{"oncebox_op":"x"}}`, "args.metadata.oncebox_op", "reserved"},
		{"metadata number value", `{"amount":1,"currency":"usd","metadata":{"foo":1}}`, "args.metadata.foo", "must be a string"},
		{"metadata null value", `{"amount":1,"currency":"usd","metadata":{"foo":null}}`, "args.metadata.foo", "must be a string"},
		{"metadata long value", `{"amount":1,"currency":"usd","metadata":{"foo":` + quote(strings.Repeat("v", 501)) + `}}`, "args.metadata.foo", "at most 500 characters"},
		{"metadata duplicate key", `{"amount":1,"currency":"usd","metadata":{"foo":"a","foo":"b"}}`, "args.metadata.foo", "more than once"},

		{"unknown field", `{"amount":1,"currency":"usd","capture_method":"manual"}`, "args.capture_method", "unknown field; allowed: amount, currency, customer, payment_method, confirm, description, metadata"},
		{"field name case", `{"Amount":1,"currency":"usd"}`, "args.Amount", "unknown field"},
	}, func(args json.RawMessage) error {
		_, err := tools.DecodePaymentIntent(args)
		return err
	})
}
