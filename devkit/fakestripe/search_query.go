package fakestripe

import (
	"strconv"
	"strings"
)

// searchQuery is a parsed search query: clauses joined by AND (all must
// match) or by OR (any may match).
type searchQuery struct {
	clauses []searchClause
	or      bool
}

// searchClause is one field:value test.
type searchClause struct {
	negate bool
	field  string // metadata, status, currency, customer, amount, created
	key    string // the metadata key
	op     string // ":", ">", "<", ">=", "<="
	value  string
	number int64 // value as an integer, for amount and created
}

// parseSearchQuery parses the subset of Stripe's search language the fake
// supports.
func parseSearchQuery(raw string) (searchQuery, *apiError) {
	var q searchQuery
	ands, ors := splitOutsideQuotes(raw, " AND "), splitOutsideQuotes(raw, " OR ")
	if len(ands) > 1 && len(ors) > 1 {
		return q, invalidParam("query", "", "Queries cannot mix AND and OR.")
	}
	parts := ands
	if len(ors) > 1 {
		parts, q.or = ors, true
	}
	for _, part := range parts {
		c, err := parseSearchClause(strings.TrimSpace(part))
		if err != nil {
			return q, err
		}
		q.clauses = append(q.clauses, c)
	}
	return q, nil
}

func parseSearchClause(s string) (searchClause, *apiError) {
	var c searchClause
	bad := func(why string) (searchClause, *apiError) {
		return c, invalidParam("query", "", "Invalid search query near '"+s+"': "+why+".")
	}
	rest := s
	if r, ok := strings.CutPrefix(rest, "-"); ok {
		c.negate, rest = true, r
	}
	i := strings.IndexAny(rest, `[:<>`)
	if i <= 0 {
		return bad("expected field:value")
	}
	c.field, rest = rest[:i], rest[i:]
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 || c.field != "metadata" {
			return bad("only metadata takes a [\"key\"]")
		}
		key, err := unquote(rest[1:end])
		if err != nil {
			return bad("the metadata key must be quoted")
		}
		c.key, rest = key, rest[end+1:]
	} else if c.field == "metadata" {
		return bad(`metadata needs a key, as in metadata["k"]:"v"`)
	}
	for _, op := range []string{">=", "<=", ":", ">", "<"} {
		if r, ok := strings.CutPrefix(rest, op); ok {
			c.op, rest = op, r
			break
		}
	}
	if c.op == "" {
		return bad("expected an operator (:, >, <, >=, <=)")
	}
	value, err := unquote(rest)
	if err != nil || value == "" {
		return bad("expected a value")
	}
	c.value = value
	switch c.field {
	case "metadata", "status", "currency", "customer":
		if c.op != ":" {
			return bad(c.field + " supports only ':'")
		}
	case "amount", "created":
		n, perr := strconv.ParseInt(value, 10, 64)
		if perr != nil {
			return bad(c.field + " needs an integer")
		}
		c.number = n
	default:
		return bad("unsupported field " + c.field)
	}
	return c, nil
}

// splitOutsideQuotes splits s around sep where sep is not inside a quoted
// value.
func splitOutsideQuotes(s, sep string) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++ // Skip the escaped character.
		case s[i] == '"':
			quoted = !quoted
		case !quoted && strings.HasPrefix(s[i:], sep):
			parts = append(parts, s[start:i])
			start = i + len(sep)
			i = start - 1
		}
	}
	return append(parts, s[start:])
}

// unquote strips the double quotes around a search value, if any.
func unquote(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		return strconv.Unquote(s)
	}
	return s, nil
}

// match reports whether rec satisfies the query.
func (q searchQuery) match(rec *paymentIntentRecord) bool {
	for _, c := range q.clauses {
		if c.match(rec) == q.or {
			return q.or
		}
	}
	return !q.or
}

func (c searchClause) match(rec *paymentIntentRecord) bool {
	var ok bool
	switch c.field {
	case "metadata":
		v, found := rec.pi.Metadata[c.key]
		ok = found && v == c.value
	case "status":
		ok = rec.pi.Status == c.value
	case "currency":
		ok = strings.EqualFold(rec.pi.Currency, c.value)
	case "customer":
		ok = rec.pi.Customer == c.value
	case "amount":
		ok = compareInt(rec.pi.Amount, c.op, c.number)
	case "created":
		ok = compareInt(rec.pi.Created.Unix(), c.op, c.number)
	}
	return ok != c.negate
}

func compareInt(a int64, op string, b int64) bool {
	switch op {
	case ">":
		return a > b
	case "<":
		return a < b
	case ">=":
		return a >= b
	case "<=":
		return a <= b
	}
	return a == b
}
