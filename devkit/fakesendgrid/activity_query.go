package fakesendgrid

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// entryPredicate is one condition of an Email Activity query.
type entryPredicate func(activityEntry) bool

// queryClause recognises one condition form at the start of the remaining
// query text and builds its predicate from the regexp's submatch indexes.
type queryClause struct {
	re    *regexp.Regexp
	build func(text string, m []int) (entryPredicate, error)
}

// quoted matches a "double" or 'single' quoted string as two groups.
const quoted = `(?:"([^"]*)"|'([^']*)')`

var (
	andKeyword = regexp.MustCompile(`(?i)^AND\b`)

	queryClauses = []queryClause{
		{
			re: regexp.MustCompile(`(?i)^unique_args\[\s*` + quoted + `\s*\]\s*=\s*` + quoted),
			build: func(text string, m []int) (entryPredicate, error) {
				key, value := group(text, m, 1), group(text, m, 3)
				return func(e activityEntry) bool {
					v, ok := e.msg.CustomArgs[key]
					return ok && v == value
				}, nil
			},
		},
		{
			re: regexp.MustCompile(`(?i)^msg_id\s+LIKE\s+` + quoted),
			build: func(text string, m []int) (entryPredicate, error) {
				re := likePattern(group(text, m, 1))
				return func(e activityEntry) bool { return re.MatchString(e.msgID) }, nil
			},
		},
		{
			re: regexp.MustCompile(`(?i)^msg_id\s*=\s*` + quoted),
			build: func(text string, m []int) (entryPredicate, error) {
				id := group(text, m, 1)
				return func(e activityEntry) bool { return e.msgID == id }, nil
			},
		},
		{
			re: regexp.MustCompile(`(?i)^last_event_time\s+BETWEEN\s+TIMESTAMP\s*` + quoted + `\s+AND\s+TIMESTAMP\s*` + quoted),
			build: func(text string, m []int) (entryPredicate, error) {
				from, err := time.Parse(time.RFC3339, group(text, m, 1))
				if err != nil {
					return nil, fmt.Errorf("last_event_time start: %w", err)
				}
				to, err := time.Parse(time.RFC3339, group(text, m, 3))
				if err != nil {
					return nil, fmt.Errorf("last_event_time end: %w", err)
				}
				return func(e activityEntry) bool {
					t := eventTime(e.msg.AcceptedAt)
					return !t.Before(from) && !t.After(to)
				}, nil
			},
		},
	}
)

// likePattern compiles an SQL LIKE pattern: % matches any run of characters
// and _ any one character (X-Message-Ids contain _, which then matches itself).
func likePattern(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^`)
	for _, r := range pattern {
		switch r {
		case '%':
			b.WriteString(`.*`)
		case '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// group returns the text of quoted's groups starting at i: the double-quoted
// one if it matched, else the single-quoted one.
func group(text string, m []int, i int) string {
	if m[2*i] >= 0 {
		return text[m[2*i]:m[2*i+1]]
	}
	return text[m[2*i+2]:m[2*i+3]]
}

// parseActivityQuery parses the subset of SendGrid's Email Activity query
// language the fake supports: unique_args['k']="v", msg_id LIKE 'pattern%',
// msg_id="id" and last_event_time BETWEEN TIMESTAMP "t1" AND TIMESTAMP "t2",
// joined by AND and optionally parenthesised. All predicates must hold.
func parseActivityQuery(query string) ([]entryPredicate, error) {
	p := &queryParser{text: query}
	preds, err := p.conjunction()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.text) {
		return nil, fmt.Errorf("unexpected %q at offset %d", p.text[p.pos:], p.pos)
	}
	return preds, nil
}

type queryParser struct {
	text string
	pos  int
}

func (p *queryParser) rest() string { return p.text[p.pos:] }

func (p *queryParser) skipSpace() {
	p.pos = len(p.text) - len(strings.TrimLeft(p.rest(), " \t\r\n"))
}

// conjunction parses term (AND term)*.
func (p *queryParser) conjunction() ([]entryPredicate, error) {
	var preds []entryPredicate
	for {
		more, err := p.term()
		if err != nil {
			return nil, err
		}
		preds = append(preds, more...)
		p.skipSpace()
		m := andKeyword.FindStringIndex(p.rest())
		if m == nil {
			return preds, nil
		}
		p.pos += m[1]
	}
}

// term parses one clause or a parenthesised conjunction.
func (p *queryParser) term() ([]entryPredicate, error) {
	p.skipSpace()
	if strings.HasPrefix(p.rest(), "(") {
		p.pos++
		preds, err := p.conjunction()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if !strings.HasPrefix(p.rest(), ")") {
			return nil, fmt.Errorf("missing ) at offset %d", p.pos)
		}
		p.pos++
		return preds, nil
	}
	rest := p.rest()
	for _, c := range queryClauses {
		m := c.re.FindStringSubmatchIndex(rest)
		if m == nil {
			continue
		}
		pred, err := c.build(rest, m)
		if err != nil {
			return nil, err
		}
		p.pos += m[1]
		return []entryPredicate{pred}, nil
	}
	return nil, fmt.Errorf("unsupported condition at offset %d: %q", p.pos, rest)
}
