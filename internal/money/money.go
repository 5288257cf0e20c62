// Package money shows an amount in a currency's minor units as a person reads it:
// 2500 usd is "$25.00 USD", 2500 jpy "¥2,500 JPY", 1250 kwd "1.250 KWD". Amounts on the
// wire and in files stay in minor units; this is only how they are written for people.
package money

import (
	"strconv"
	"strings"
)

// exponents are the ISO 4217 currencies whose minor unit is not a hundredth: the
// number of digits after the decimal point. Every other code has 2.
var exponents = map[string]int{
	// No minor unit.
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	// ISO 4217 gives the ariary 2, but Stripe, whose amounts these are, takes it in whole
	// units.
	"MGA": 0,
	// Thousandths.
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	// Units of account with four digits.
	"CLF": 4, "UYW": 4,
}

// symbols are written before the amount of the most common currencies; the code
// follows every amount, so that "$" is never taken for another dollar.
var symbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}

// Exponent returns the number of digits after the decimal point of the currency's
// amounts (case does not matter): 0 for JPY, 3 for KWD, 2 for USD and for a code it
// does not know.
func Exponent(currency string) int {
	if e, ok := exponents[strings.ToUpper(currency)]; ok {
		return e
	}
	return 2
}

// Format writes an amount in the currency's minor units for a person: the symbol of a
// common currency, thousands separated by commas, the decimals the currency has, and
// its upper-case code: "$25.00 USD", "-€1,234.50 EUR", "¥2,500 JPY", "1.250 KWD". An
// unknown code gets 2 decimals and is shown as given. Without a currency the amount is
// written as a whole number that says so: "2,500 (currency unknown)".
func Format(amount int64, currency string) string {
	sign := ""
	if amount < 0 {
		sign = "-"
	}
	if currency == "" {
		return sign + group(abs(amount)) + " (currency unknown)"
	}
	code := strings.ToUpper(currency)
	return sign + symbols[code] + number(abs(amount), Exponent(code), group) + " " + code
}

// number writes a non-negative amount of minor units with exp decimals, its whole
// part written by whole.
func number(n uint64, exp int, whole func(uint64) string) string {
	if exp == 0 {
		return whole(n)
	}
	div := uint64(1)
	for range exp {
		div *= 10
	}
	frac := strconv.FormatUint(n%div, 10)
	return whole(n/div) + "." + strings.Repeat("0", exp-len(frac)) + frac
}

// group writes n with a comma between each group of three digits.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// abs returns |n| without overflow for the smallest int64.
func abs(n int64) uint64 {
	if n < 0 {
		return uint64(-(n + 1)) + 1
	}
	return uint64(n)
}

// Decimal writes an amount in the currency's minor units as a plain decimal number for a
// file a spreadsheet reads: no symbol, no code, no thousands separator, a point before
// the currency's decimals: 2500 usd is "25.00", -2500 jpy "-2500", 1250 kwd "1.250".
// Without a currency (its decimals unknown) the minor units are written as they are.
func Decimal(amount int64, currency string) string {
	if currency == "" {
		return strconv.FormatInt(amount, 10)
	}
	sign := ""
	if amount < 0 {
		sign = "-"
	}
	return sign + number(abs(amount), Exponent(currency), func(n uint64) string { return strconv.FormatUint(n, 10) })
}

// Limit writes a budget's figure for a person: a count of ops (currency "") as a number,
// an amount as Format writes it, and an amount of "*" (every currency a budget does not
// name, each in its own minor units) as "5,000 minor units of any other currency".
func Limit(n int64, currency string) string {
	switch currency {
	case "":
		return strconv.FormatInt(n, 10)
	case "*":
		sign := ""
		if n < 0 {
			sign = "-"
		}
		return sign + group(abs(n)) + " minor units of any other currency"
	}
	return Format(n, currency)
}
