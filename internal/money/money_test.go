package money_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/money"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{2500, "usd", "$25.00 USD"},
		{29000, "USD", "$290.00 USD"},
		{5, "usd", "$0.05 USD"},
		{0, "usd", "$0.00 USD"},
		{123456789, "eur", "€1,234,567.89 EUR"},
		{100050, "gbp", "£1,000.50 GBP"},
		{2500, "jpy", "¥2,500 JPY"},
		{2500, "krw", "2,500 KRW"},
		{999, "vnd", "999 VND"},
		{1250, "kwd", "1.250 KWD"},
		{1234567, "bhd", "1,234.567 BHD"},
		{7, "tnd", "0.007 TND"},
		{12345, "clf", "1.2345 CLF"},
		{-2500, "usd", "-$25.00 USD"},
		{-1250, "kwd", "-1.250 KWD"},
		{-2500, "jpy", "-¥2,500 JPY"},
		{2500, "xyz", "25.00 XYZ"},
		{2500, "", "2,500 (currency unknown)"},
		{-2500, "", "-2,500 (currency unknown)"},
		{999, "", "999 (currency unknown)"},
		{math.MinInt64, "", "-9,223,372,036,854,775,808 (currency unknown)"},
	} {
		require.Equal(t, tc.want, money.Format(tc.amount, tc.currency), "%d %q", tc.amount, tc.currency)
	}
}

func TestExponent(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int{"usd": 2, "JPY": 0, "isk": 0, "clp": 0, "KWD": 3, "omr": 3, "jod": 3, "lyd": 3, "iqd": 3, "zzz": 2} {
		require.Equal(t, want, money.Exponent(code), code)
	}
}

func TestDecimal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{2500, "usd", "25.00"},
		{123456789, "EUR", "1234567.89"},
		{-5, "usd", "-0.05"},
		{2500, "jpy", "2500"},
		{1250, "kwd", "1.250"},
		{2000, "", "2000"},
		{math.MinInt64, "usd", "-92233720368547758.08"},
	} {
		require.Equal(t, tc.want, money.Decimal(tc.amount, tc.currency), "%d %s", tc.amount, tc.currency)
	}
}
