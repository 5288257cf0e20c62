package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// repoRoot is the module's root, seen from this package's folder.
const repoRoot = "../.."

// TestConfigurationDocListsEverySetting keeps docs/configuration.md's table true: it is
// exactly what `oncebox config` prints, every flag and environment variable with its
// default, once each.
func TestConfigurationDocListsEverySetting(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "configuration.md"))
	require.NoError(t, err)
	var table strings.Builder
	printSettings(&table)
	want := strings.TrimSpace(table.String())
	header := strings.SplitN(want, "\n", 2)[0]
	start := strings.Index(string(doc), header)
	require.GreaterOrEqual(t, start, 0, "docs/configuration.md has no settings table; paste `oncebox config`")
	got := string(doc[start:])
	if end := strings.Index(got, "\n\n"); end >= 0 {
		got = got[:end]
	}
	require.Equal(t, want, strings.TrimSpace(got), "docs/configuration.md's settings table is out of date; paste `oncebox config`")
}

// TestReadmeIsShort: the README is a door, not the house; reference goes to docs/.
func TestReadmeIsShort(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	require.LessOrEqual(t, lines, 320, "README.md has %d lines: move reference content to a page under docs/", lines)
}

// TestReadmeKeepsTheTestCommand: the README's test command is the one CI runs.
func TestReadmeKeepsTheTestCommand(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^make test\b`, string(readme), "the README's test command is make test")
	require.Regexp(t, `(?m)^make test$`, string(ci), ".ci/run runs the README's test command, make test")
	require.Regexp(t, `(?m)^make dev\b`, string(readme), "the README's run command is make dev")
}

var (
	// mdLink is an inline Markdown link or image: [text](target) or [text](target "title").
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// codeSpan is inline code, whose brackets are no links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// markdownProse returns a Markdown file's lines outside fenced code blocks, inline code
// removed.
func markdownProse(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		out = append(out, codeSpan.ReplaceAllString(line, ""))
	}
	return out
}

// anchors returns the anchors GitHub makes of a Markdown file's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered (-1, -2, ...).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestReadmeAndDocsLinksResolve: every relative link of README.md and docs/*.md names a
// file that exists and, when it names an anchor, a heading of that file.
func TestReadmeAndDocsLinksResolve(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	files := append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
	checked := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		name, _ := filepath.Rel(repoRoot, file)
		for i, line := range markdownProse(string(raw)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := strings.Trim(m[1], "<>")
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					_, err := os.Stat(resolved)
					require.NoError(t, err, "%s: the link %q names no file", name, target)
				}
				if anchor != "" {
					linked, err := os.ReadFile(resolved)
					require.NoError(t, err, "%s: the link %q names an anchor in something that is not a file", name, target)
					require.True(t, anchors(string(linked))[anchor], "%s (prose line %d): the link %q names no heading of %s", name, i+1, target, resolved)
				}
				checked++
			}
		}
	}
	require.Greater(t, checked, 20)
}

// TestAnchorsFollowGitHub pins the anchors the link check expects.
func TestAnchorsFollowGitHub(t *testing.T) {
	t.Parallel()
	got := anchors("# Tools: your own catalog\n## Deployment: failover\n## Your own vendor, in Go\n```\n# not a heading\n```\n## Tracing (OpenTelemetry)\n## Tracing (OpenTelemetry)\n### `oncebox dev`\n")
	require.Equal(t, map[string]bool{
		"tools-your-own-catalog": true, "deployment-failover": true, "your-own-vendor-in-go": true,
		"tracing-opentelemetry": true, "tracing-opentelemetry-1": true, "oncebox-dev": true,
	}, got)
}
