package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/vendorapi"
)

// invalidCase is one refused argument set: the field and a fragment of the message
// the refusal must carry.
type invalidCase struct {
	name  string
	args  string
	field string
	msg   string
}

// requireInvalid asserts that err is an *vendorapi.ValidationError for field whose
// message contains msg.
func requireInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, vendorapi.ErrInvalidArgs)
	ve, ok := err.(*vendorapi.ValidationError)
	require.True(t, ok, "error is %T, want *vendorapi.ValidationError", err)
	require.Equal(t, field, ve.Field, "message: %s", ve.Message)
	require.Contains(t, ve.Message, msg)
	require.GreaterOrEqual(t, len(ve.Message), 8, "message should say what is wrong")
}

// runInvalid runs decode on every case and checks the refusal.
func runInvalid(t *testing.T, cases []invalidCase, decode func(json.RawMessage) error) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireInvalid(t, decode(json.RawMessage(tc.args)), tc.field, tc.msg)
		})
	}
}

// metadataJSON returns a JSON object with n keys k0..k(n-1).
func metadataJSON(n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// quote returns s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
