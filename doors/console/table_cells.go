package console

import (
	"bytes"
	"html"
	"strconv"
	"strings"

	nethtml "golang.org/x/net/html"
)

// tableRoles are the ARIA roles labelCells gives a table's elements, so that a table
// shown as cards on a phone (console.css) keeps its semantics in browsers that drop
// them when a table's display changes.
var tableRoles = map[string]string{"table": "table", "thead": "rowgroup", "tbody": "rowgroup", "tfoot": "rowgroup", "tr": "row"}

// tableState is what labelCells knows of one open table: its column headers and where
// the current row is.
type tableState struct {
	headers []string
	inHead  bool
	col     int
	// heading is the text of the header cell being read, nil outside one.
	heading *strings.Builder
	span    int
}

// labelCells gives every body cell of every table in page a data-label attribute: the
// text of its column's header (from the table's thead; empty for a cell spanning
// several columns), which console.css shows in front of the cell when a narrow screen
// turns each row into a card. A cell that has a data-label keeps it. Each table element
// gets its ARIA role too. Everything else is copied byte for byte.
func labelCells(page []byte) []byte {
	z := nethtml.NewTokenizer(bytes.NewReader(page))
	out := bytes.NewBuffer(make([]byte, 0, len(page)+len(page)/8))
	var stack []*tableState
	for {
		tt := z.Next()
		if tt == nethtml.ErrorToken {
			return out.Bytes()
		}
		raw := bytes.Clone(z.Raw())
		var top *tableState
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tt {
		case nethtml.StartTagToken:
			tok := z.Token()
			if tok.Data == "table" {
				top = &tableState{}
				stack = append(stack, top)
			}
			out.Write(withAttrs(raw, top.open(tok)))
			continue
		case nethtml.EndTagToken:
			name, _ := z.TagName()
			if string(name) == "table" && top != nil {
				stack = stack[:len(stack)-1]
			}
			top.close(string(name))
		case nethtml.TextToken:
			if top != nil && top.heading != nil {
				top.heading.WriteString(nethtml.UnescapeString(string(raw)))
			}
		}
		out.Write(raw)
	}
}

// open notes a start tag inside the table and returns the attributes to add to it.
func (ts *tableState) open(tok nethtml.Token) [][2]string {
	if ts == nil {
		return nil
	}
	add := func(adds [][2]string, name, value string) [][2]string {
		if hasAttr(tok, name) {
			return adds
		}
		return append(adds, [2]string{name, value})
	}
	var adds [][2]string
	if role, ok := tableRoles[tok.Data]; ok {
		adds = add(adds, "role", role)
	}
	switch tok.Data {
	case "thead":
		ts.inHead = true
	case "tr":
		ts.col = 0
	case "th", "td":
		span := colspan(tok)
		switch {
		case ts.inHead:
			ts.heading, ts.span = &strings.Builder{}, span
			adds = add(adds, "role", "columnheader")
		default:
			label := ""
			if span == 1 && ts.col < len(ts.headers) {
				label = ts.headers[ts.col]
			}
			adds = add(adds, "data-label", label)
			adds = add(adds, "role", map[string]string{"th": "rowheader", "td": "cell"}[tok.Data])
		}
		ts.col += span
	}
	return adds
}

// close notes an end tag inside the table.
func (ts *tableState) close(name string) {
	if ts == nil {
		return
	}
	switch name {
	case "thead":
		ts.inHead = false
	case "th", "td":
		if ts.heading != nil {
			h := strings.Join(strings.Fields(ts.heading.String()), " ")
			for range ts.span {
				ts.headers = append(ts.headers, h)
			}
			ts.heading = nil
		}
	}
}

func hasAttr(tok nethtml.Token, name string) bool {
	for _, a := range tok.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}

// colspan is a cell's colspan, 1 when absent or not a positive number.
func colspan(tok nethtml.Token) int {
	for _, a := range tok.Attr {
		if a.Key == "colspan" {
			if n, err := strconv.Atoi(strings.TrimSpace(a.Val)); err == nil && n > 0 {
				return min(n, 1000)
			}
		}
	}
	return 1
}

// withAttrs returns the raw start tag with the attributes added before its end.
func withAttrs(raw []byte, adds [][2]string) []byte {
	if len(adds) == 0 {
		return raw
	}
	end := len(raw) - 1
	if end > 0 && raw[end-1] == '/' {
		end--
	}
	var b bytes.Buffer
	b.Write(raw[:end])
	for _, a := range adds {
		b.WriteString(" " + a[0] + `="` + html.EscapeString(a[1]) + `"`)
	}
	b.Write(raw[end:])
	return b.Bytes()
}
