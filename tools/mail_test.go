package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

// recipientsJSON returns a to array of n distinct addresses.
func recipientsJSON(n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = fmt.Sprintf(`{"email":"user%d@example.com"}`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// categoriesJSON returns a categories array of n distinct names.
func categoriesJSON(n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = fmt.Sprintf(`"cat%d"`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestDecodeMailValid(t *testing.T) {
	t.Parallel()

	t.Run("text mail", func(t *testing.T) {
		t.Parallel()
		a, err := tools.DecodeMail(json.RawMessage(`{
			"from": {"email": "billing@shop.example", "name": "Shop"},
			"to": [{"email": "ada@example.com", "name": "Ada Lovelace"}, {"email": "bob@example.org"}],
			"subject": "Your receipt", "text": "Thanks!", "categories": ["receipt", "agent"]
		}`))
		require.NoError(t, err)
		require.Equal(t, protocol.MailArgs{
			From:       protocol.Address{Email: "billing@shop.example", Name: "Shop"},
			To:         []protocol.Address{{Email: "ada@example.com", Name: "Ada Lovelace"}, {Email: "bob@example.org"}},
			Subject:    "Your receipt",
			Text:       "Thanks!",
			Categories: []string{"receipt", "agent"},
		}, a)
	})

	t.Run("html only", func(t *testing.T) {
		t.Parallel()
		_, err := tools.DecodeMail(json.RawMessage(`{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"s","html":"<p>hi</p>"}`))
		require.NoError(t, err)
	})

	t.Run("template without subject or body", func(t *testing.T) {
		t.Parallel()
		a, err := tools.DecodeMail(json.RawMessage(`{
			"from": {"email": "a@example.com"}, "to": [{"email": "b@example.com"}],
			"template_id": "d-0123456789abcdef",
			"dynamic_template_data": {"name": "Ada", "total": 12345678901234567890, "items": [1.50]}
		}`))
		require.NoError(t, err)
		require.Equal(t, "d-0123456789abcdef", a.TemplateID)
		require.Equal(t, json.Number("12345678901234567890"), a.DynamicTemplateData["total"], "numbers are kept as written")
		require.Equal(t, []any{json.Number("1.50")}, a.DynamicTemplateData["items"])
	})

	t.Run("limits reached exactly", func(t *testing.T) {
		t.Parallel()
		args := `{"from":{"email":"a@example.com"},"to":` + recipientsJSON(1000) + `,
			"subject":` + quote(strings.Repeat("s", 998)) + `,"text":"t",
			"categories":` + categoriesJSON(10) + `}`
		a, err := tools.DecodeMail(json.RawMessage(args))
		require.NoError(t, err)
		require.Len(t, a.To, 1000)
		require.Len(t, a.Categories, 10)
	})

	t.Run("longest category", func(t *testing.T) {
		t.Parallel()
		_, err := tools.DecodeMail(json.RawMessage(`{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"s","text":"t","categories":[` + quote(strings.Repeat("c", 255)) + `]}`))
		require.NoError(t, err)
	})
}

func TestDecodeMailInvalid(t *testing.T) {
	t.Parallel()

	// mail returns a valid text mail with the given fields replaced, added or
	// (when the value is "") removed.
	mail := func(set map[string]string) string {
		fields := map[string]string{
			"from":    `{"email":"a@example.com"}`,
			"to":      `[{"email":"b@example.com"}]`,
			"subject": `"Hello"`,
			"text":    `"Body"`,
		}
		for k, v := range set {
			if v == "" {
				delete(fields, k)
			} else {
				fields[k] = v
			}
		}
		parts := make([]string, 0, len(fields))
		for k, v := range fields {
			parts = append(parts, quote(k)+":"+v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	const bare = "must be a bare email address"

	runInvalid(t, []invalidCase{
		{"from missing", mail(map[string]string{"from": ""}), "args.from", "is required"},
		{"from a string", mail(map[string]string{"from": `"a@example.com"`}), "args.from", "must be an object with email"},
		{"from email missing", mail(map[string]string{"from": `{"name":"A"}`}), "args.from.email", "is required"},
		{"from email empty", mail(map[string]string{"from": `{"email":""}`}), "args.from.email", "is required"},
		{"from email invalid", mail(map[string]string{"from": `{"email":"not-an-address"}`}), "args.from.email", bare},
		{"from email with display name", mail(map[string]string{"from": `{"email":"Shop <a@example.com>"}`}), "args.from.email", "put a display name in name"},
		{"from email with spaces", mail(map[string]string{"from": `{"email":" a@example.com"}`}), "args.from.email", bare},
		{"from name not string", mail(map[string]string{"from": `{"email":"a@example.com","name":1}`}), "args.from.name", "must be a string"},
		{"from unknown field", mail(map[string]string{"from": `{"email":"a@example.com","reply_to":"x"}`}), "args.from.reply_to", "unknown field; allowed: email, name"},

		{"to missing", mail(map[string]string{"to": ""}), "args.to", "is required"},
		{"to an object", mail(map[string]string{"to": `{"email":"b@example.com"}`}), "args.to", "must be an array of addresses"},
		{"to empty", mail(map[string]string{"to": `[]`}), "args.to", "at least 1 recipient"},
		{"to too many", mail(map[string]string{"to": recipientsJSON(1001)}), "args.to", "at most 1000 recipients"},
		{"to element a string", mail(map[string]string{"to": `[{"email":"b@example.com"},"c@example.com"]`}), "args.to[1]", "must be an object with email"},
		{"to element null", mail(map[string]string{"to": `[null]`}), "args.to[0]", "must be an object with email"},
		{"to third email invalid", mail(map[string]string{"to": `[{"email":"b@example.com"},{"email":"c@example.com"},{"email":"d@"}]`}), "args.to[2].email", bare},
		{"to email with display name", mail(map[string]string{"to": `[{"email":"Bob <b@example.com>"}]`}), "args.to[0].email", bare},
		{"to email missing", mail(map[string]string{"to": `[{"name":"Bob"}]`}), "args.to[0].email", "is required"},
		{"to duplicate", mail(map[string]string{"to": `[{"email":"b@example.com"},{"email":"c@example.com"},{"email":"B@Example.com"}]`}), "args.to[2].email", "duplicates args.to[0].email"},
		{"to unknown field", mail(map[string]string{"to": `[{"email":"b@example.com","type":"cc"}]`}), "args.to[0].type", "unknown field"},

		{"subject missing", mail(map[string]string{"subject": ""}), "args.subject", "is required unless template_id is given"},
		{"subject empty", mail(map[string]string{"subject": `""`}), "args.subject", "must not be empty"},
		{"subject too long", mail(map[string]string{"subject": quote(strings.Repeat("s", 999))}), "args.subject", "at most 998 characters"},
		{"subject not string", mail(map[string]string{"subject": `1`}), "args.subject", "must be a string"},

		{"no body", mail(map[string]string{"text": ""}), "args.text", "is required unless html or template_id is given"},
		{"empty text", mail(map[string]string{"text": `""`, "html": `"<p>x</p>"`}), "args.text", "must not be empty"},
		{"empty html", mail(map[string]string{"html": `""`}), "args.html", "must not be empty"},
		{"template_id empty", mail(map[string]string{"template_id": `""`}), "args.template_id", "must not be empty"},

		{"dynamic data without template", mail(map[string]string{"dynamic_template_data": `{"a":1}`}), "args.dynamic_template_data", "only with template_id"},
		{"dynamic data not object", mail(map[string]string{"template_id": `"d-1"`, "dynamic_template_data": `[1]`}), "args.dynamic_template_data", "must be a JSON object"},

		{"categories not array", mail(map[string]string{"categories": `"receipt"`}), "args.categories", "must be an array of strings"},
		{"categories too many", mail(map[string]string{"categories": categoriesJSON(11)}), "args.categories", "at most 10 categories"},
		{"category empty", mail(map[string]string{"categories": `["a",""]`}), "args.categories[1]", "1 to 255 characters"},
		{"category too long", mail(map[string]string{"categories": `[` + quote(strings.Repeat("c", 256)) + `]`}), "args.categories[0]", "1 to 255 characters"},
		{"category non-ASCII", mail(map[string]string{"categories": `["reçu"]`}), "args.categories[0]", "printable ASCII"},
		{"category control character", mail(map[string]string{"categories": `["a\tb"]`}), "args.categories[0]", "printable ASCII"},
		{"category not string", mail(map[string]string{"categories": `[1]`}), "args.categories[0]", "must be a string"},
		{"category duplicate", mail(map[string]string{"categories": `["a","b","a"]`}), "args.categories[2]", "duplicates args.categories[0]"},

		{"unknown field", mail(map[string]string{"cc": `[{"email":"c@example.com"}]`}), "args.cc", "unknown field; allowed: from, to, subject, text, html, template_id, dynamic_template_data, categories"},
	}, func(args json.RawMessage) error {
		_, err := tools.DecodeMail(args)
		return err
	})
}
