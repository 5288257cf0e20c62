package console

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLabelCells: every body cell gets its column's header as data-label (escaped,
// whitespace collapsed, colspan counted), a cell's own label wins, a spanning cell's
// label is empty, nested tables have their own headers, and the rest of the page is
// copied byte for byte.
func TestLabelCells(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ in, want string }{
		"columns": {
			in: `<!doctype html><p>x &amp; y</p><table class="t"><thead><tr><th>Key</th><th colspan="2">Limit
  &amp; <abbr>used</abbr></th><th>Left</th></tr></thead>
<tbody><tr><td>a</td><td class="limit">1</td><td data-label="Used!">2</td><td>3</td></tr>
<tr><td colspan="4">none</td></tr></tbody></table>`,
			want: `<!doctype html><p>x &amp; y</p><table class="t" role="table"><thead role="rowgroup"><tr role="row"><th role="columnheader">Key</th><th colspan="2" role="columnheader">Limit
  &amp; <abbr>used</abbr></th><th role="columnheader">Left</th></tr></thead>
<tbody role="rowgroup"><tr role="row"><td data-label="Key" role="cell">a</td><td class="limit" data-label="Limit &amp; used" role="cell">1</td><td data-label="Used!" role="cell">2</td><td data-label="Left" role="cell">3</td></tr>
<tr role="row"><td colspan="4" data-label="" role="cell">none</td></tr></tbody></table>`,
		},
		"nested and row headers": {
			in:   `<table><thead><tr><th>A</th><th>B</th></tr></thead><tbody><tr><th>r</th><td><table><thead><tr><th>In</th></tr></thead><tbody><tr><td>i</td></tr></tbody></table></td></tr></tbody></table>`,
			want: `<table role="table"><thead role="rowgroup"><tr role="row"><th role="columnheader">A</th><th role="columnheader">B</th></tr></thead><tbody role="rowgroup"><tr role="row"><th data-label="A" role="rowheader">r</th><td data-label="B" role="cell"><table role="table"><thead role="rowgroup"><tr role="row"><th role="columnheader">In</th></tr></thead><tbody role="rowgroup"><tr role="row"><td data-label="In" role="cell">i</td></tr></tbody></table></td></tr></tbody></table>`,
		},
		"no header, no table": {
			in:   `<table role="presentation"><tr><td>x</td><td>y</td></tr></table><td>stray</td>`,
			want: `<table role="presentation"><tr role="row"><td data-label="" role="cell">x</td><td data-label="" role="cell">y</td></tr></table><td>stray</td>`,
		},
	} {
		require.Equal(t, tc.want, string(labelCells([]byte(tc.in))), name)
	}
}
