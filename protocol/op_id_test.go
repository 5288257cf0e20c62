package protocol_test

import (
	"testing"

	"github.com/oncebox/oncebox/protocol"
)

func TestIsOpID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"0192b6c4-7a3e-7cde-8f01-23456789abcd":  true,
		"0192B6C4-7A3E-7CDE-8F01-23456789ABCD":  true,
		"":                                      false,
		"op_123":                                false,
		"0192b6c4-7a3e-7cde-8f01-23456789abc":   false,
		"0192b6c4-7a3e-7cde-8f01-23456789abcde": false,
		"0192b6c4x7a3e-7cde-8f01-23456789abcd":  false,
		"0192b6c4-7a3e-7cde-8f01-23456789abcg":  false,
		"{192b6c4-7a3e-7cde-8f01-23456789abcd}": false,
	} {
		if got := protocol.IsOpID(s); got != want {
			t.Errorf("IsOpID(%q) = %v, want %v", s, got, want)
		}
	}
}
