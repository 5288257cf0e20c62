package main

import (
	"fmt"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
)

// minFontPx is the smallest rendered text size a console page may show, SVG text
// included (its font size times the SVG's scale on the screen).
const minFontPx = 11

// contentFit is what contentScript finds wrong on a page: each list names the
// elements, with the start of their text.
type contentFit struct {
	// Hidden are table cells outside the window, or cut off by a box that clips them
	// without a visible cue (a scroll shadow), or not shown at all.
	Hidden []string `json:"hidden"`
	// Unlabeled are cells of a column whose header is not shown (a row shown as a
	// card) that do not show the header's text as their label.
	Unlabeled []string `json:"unlabeled"`
	// Cut are elements whose content is wider than their box: spilling over its
	// neighbours, or cut off without a cue.
	Cut []string `json:"cut"`
	// Small is text rendered smaller than minFontPx.
	Small []string `json:"small"`
	// Split are words broken across lines though they fit on one: a break inside a
	// word is for words (ids) longer than their line only.
	Split []string `json:"split"`
}

// contentScript, called with minFontPx, checks every table (all of them: a new page's tables are checked
// without naming them), every box that clips, all text and every chart of the page
// the tab shows. A scroll container's cue is a gradient background (the scroll
// shadows of console.css's .scroll).
const contentScript = `(minFont) => {
  const out = {hidden: [], unlabeled: [], cut: [], small: [], split: []};
  const vw = window.innerWidth;
  const say = el => el.tagName.toLowerCase() + (el.getAttribute('class') ? '.' + el.getAttribute('class').trim().split(/\s+/).join('.') : '') +
    ' "' + (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60) + '"';
  const shown = el => { const r = el.getBoundingClientRect(); return r.width >= 2 && r.height >= 2; };
  const clips = el => getComputedStyle(el).overflowX !== 'visible';
  const cued = el => { const s = getComputedStyle(el);
    return ((s.overflowX === 'auto' || s.overflowX === 'scroll') && /gradient/.test(s.backgroundImage)) || s.textOverflow === 'ellipsis'; };
  const hiddenByAncestor = el => {
    for (let a = el.parentElement; a; a = a.parentElement) if (a !== document.body && a !== document.documentElement && !shown(a)) return true;
    return false;
  };
  const visible = el => shown(el) && !hiddenByAncestor(el);

  // Tables: every cell is shown, in the window or in a box that scrolls with a cue;
  // where a column's header is not shown, each cell of it shows the header as a label.
  for (const table of document.querySelectorAll('table')) {
    if (hiddenByAncestor(table)) continue;
    const heads = [];
    const headRow = table.tHead && table.tHead.rows[0];
    if (headRow) for (const th of headRow.cells) for (let i = 0; i < th.colSpan; i++) heads.push(th);
    for (const row of table.rows) {
      let col = 0;
      for (const cell of row.cells) {
        const head = heads[col];
        col += cell.colSpan;
        const inHead = cell.closest('thead') !== null;
        if (!visible(cell)) {
          if (!inHead && cell.textContent.trim() !== '') out.hidden.push(say(cell) + ' (not shown)');
          continue;
        }
        const r = cell.getBoundingClientRect();
        let cutBy = null;
        for (let a = cell.parentElement; a && a !== document.documentElement; a = a.parentElement) {
          if (!clips(a)) continue;
          const b = a.getBoundingClientRect();
          if (r.left < b.left - 0.5 || r.right > b.right + 0.5) { cutBy = a; break; }
        }
        if (cutBy ? !cued(cutBy) : (r.left < -0.5 || r.right > vw + 0.5)) out.hidden.push(say(cell) + ' at ' + Math.round(r.left) + '..' + Math.round(r.right) + ' px');
        if (cell.scrollWidth > cell.clientWidth + 1) out.cut.push(say(cell) + ' spills over its cell');
        if (inHead || !head || visible(head) || cell.colSpan !== 1) continue;
        const want = head.textContent.trim().replace(/\s+/g, ' ');
        const before = getComputedStyle(cell, '::before');
        const m = /^"((?:[^"\\]|\\.)*)"/.exec(before.content);
        const label = m ? m[1].replace(/\\(.)/g, '$1') : '';
        if (label !== want || before.display === 'none' || before.visibility === 'hidden' || parseFloat(before.fontSize) < minFont)
          out.unlabeled.push(say(cell) + ' shows ' + JSON.stringify(label) + ' for the hidden header ' + JSON.stringify(want));
      }
    }
  }

  // Every box that clips (or scrolls) shows all of its content, or a cue that it does not.
  for (const el of document.body.querySelectorAll('*')) {
    if (['INPUT', 'TEXTAREA', 'SELECT', 'OPTION'].includes(el.tagName) || el.closest('svg') || !shown(el) || hiddenByAncestor(el)) continue;
    if (clips(el) && el.scrollWidth > el.clientWidth + 1 && !cued(el)) out.cut.push(say(el) + ': ' + el.scrollWidth + ' px of content in ' + el.clientWidth + ' px, no cue');
  }

  // Charts: SVG text is readable on the screen and inside its picture.
  for (const text of document.querySelectorAll('svg text')) {
    const svg = text.ownerSVGElement, ctm = text.getScreenCTM();
    if (!svg || !ctm || !shown(svg)) continue;
    const px = parseFloat(getComputedStyle(text).fontSize) * Math.hypot(ctm.a, ctm.b);
    if (px < minFont) out.small.push('svg ' + say(text) + ' at ' + px.toFixed(1) + ' px');
    const r = text.getBoundingClientRect(), b = svg.getBoundingClientRect();
    if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5) out.cut.push('svg ' + say(text) + ' reaches out of its chart');
  }

  // Text: readable, and broken inside a word only where the word is longer than its line.
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement, text = node.data;
    if (!el || text.trim() === '' || el.closest('svg, script, style, select, textarea') || !shown(el) || hiddenByAncestor(el)) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < minFont) out.small.push(say(el) + ' at ' + px + ' px');
    let box = el;
    while (box.parentElement && ['inline', 'contents'].includes(getComputedStyle(box).display)) box = box.parentElement;
    const bs = getComputedStyle(box);
    const line = box.clientWidth - parseFloat(bs.paddingLeft) - parseFloat(bs.paddingRight);
    const words = /[^\s\u200b\-\/?&]+[\-\/?&]*/g;
    for (let m = words.exec(text); m; m = words.exec(text)) {
      if (m[0].length < 2) continue;
      let top = null, split = false, width = 0;
      for (let i = m.index; i < m.index + m[0].length; i++) {
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rs = range.getClientRects();
        if (rs.length === 0) continue;
        width += rs[0].width;
        if (top === null) top = rs[0].top; else if (Math.abs(rs[0].top - top) > 3) split = true;
      }
      if (split && width <= line + 1) out.split.push(JSON.stringify(m[0]) + ' (' + Math.round(width) + ' px) broken in a ' + Math.round(line) + ' px line, in ' + say(el));
    }
  }
  for (const k in out) out[k] = out[k].slice(0, 12);
  return out;
}`

// checkContent runs contentScript on the page the tab shows, at the width it has.
func (lc *layoutChecker) checkContent(name string, width int64) {
	lc.t.Helper()
	var c contentFit
	lc.run("measure content of "+name, chromedp.Evaluate(fmt.Sprintf("(%s)(%d)", contentScript, minFontPx), &c))
	assert.Empty(lc.t, c.Hidden, "%s at %d px: these table cells are hidden (outside the window, or cut off without a cue)", name, width)
	assert.Empty(lc.t, c.Unlabeled, "%s at %d px: these cells' column header is not shown, and they show no label instead", name, width)
	assert.Empty(lc.t, c.Cut, "%s at %d px: these boxes cut their content off without a cue, or let it spill", name, width)
	assert.Empty(lc.t, c.Small, "%s at %d px: this text renders below %d px", name, width, minFontPx)
	assert.Empty(lc.t, c.Split, "%s at %d px: these words break inside though they fit on a line", name, width)
}
