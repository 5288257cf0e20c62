// Package examples_test checks the recipes in examples/ that CI cannot run end to end
// (the Python ones need a model API key and a package index): they compile, pin their
// libraries, and use only names oncebox's server reads.
package examples_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
)

// recipeFiles returns the recipes' files (Python, JSON, Markdown, TypeScript and JavaScript sources)
// and their contents, by path relative to examples/.
func recipeFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "dist" || d.Name() == "__pycache__") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".py", ".json", ".md", ".ts", ".mjs", ".txt":
			if d.Name() == "package-lock.json" {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(path)] = string(b)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestPythonRecipesCompile: every Python recipe parses (python3 -m py_compile) and sits
// beside a requirements.txt.
func TestPythonRecipesCompile(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is needed to check the Python recipes (py_compile)")
	var scripts []string
	for path := range recipeFiles(t) {
		if strings.HasSuffix(path, ".py") {
			scripts = append(scripts, path)
		}
	}
	slices.Sort(scripts)
	require.NotEmpty(t, scripts)
	for _, path := range scripts {
		cmd := exec.Command(python, "-m", "py_compile", path)
		cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir()) // no __pycache__ in the tree
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s does not compile: %s", path, out)
		_, err = os.Stat(filepath.Join(filepath.Dir(path), "requirements.txt"))
		require.NoError(t, err, "%s has no requirements.txt beside it", path)
	}
}

// TestPythonRecipesPinTheirLibraries: the requirements name the releases whose APIs the
// recipes use, and the recipes use the current ones.
func TestPythonRecipesPinTheirLibraries(t *testing.T) {
	t.Parallel()
	files := recipeFiles(t)
	for path, want := range map[string][]string{
		"openai-agents/requirements.txt": {"openai-agents>=0.8,<1"},
		"langchain/requirements.txt":     {"langchain-mcp-adapters>=0.1.12,<0.4", "langchain>=1"},
	} {
		for _, w := range want {
			require.Contains(t, files[path], w, path)
		}
	}
	lc := files["langchain/agent.py"]
	require.Contains(t, lc, "from langchain.agents import create_agent")
	require.NotContains(t, lc, "create_react_agent", "langgraph.prebuilt.create_react_agent is deprecated")
	require.Contains(t, lc, "tool_interceptors=[")
	require.Contains(t, lc, ".override(headers=")
	require.Regexp(t, `conversation_id=\{quote\(`, lc, "the conversation id is URL-encoded in the URL form")

	// The Agents SDK's session timeout (5 s by default) is above oncebox's MCP wait.
	oa := files["openai-agents/agent.py"]
	require.Contains(t, oa, "client_session_timeout_seconds=")
	m := regexp.MustCompile(`(?m)^SESSION_TIMEOUT_SECONDS = ONCEBOX_MCP_WAIT_SECONDS \+ (\d+)$`).FindStringSubmatch(oa)
	require.NotNil(t, m, "SESSION_TIMEOUT_SECONDS is the wait plus a margin")
	wait := regexp.MustCompile(`(?m)^ONCEBOX_MCP_WAIT_SECONDS = (\d+)$`).FindStringSubmatch(oa)
	require.NotNil(t, wait)
	secs, _ := strconv.Atoi(wait[1])
	margin, _ := strconv.Atoi(m[1])
	require.Equal(t, int(mcpserver.DefaultWait.Seconds()), secs, "the recipe names oncebox's default MCP wait")
	require.Positive(t, margin)
}

// TestRecipesUseOnlyNamesTheServerReads: every oncebox name a recipe sends (a _meta key,
// a header, a query parameter of /mcp) is one the server reads.
func TestRecipesUseOnlyNamesTheServerReads(t *testing.T) {
	t.Parallel()
	meta := regexp.MustCompile(`["'](oncebox/[a-z_]+)["']`)
	// Header names as HTTP spells them (Oncebox-Conversation-Id), not program names.
	header := regexp.MustCompile(`\b(Oncebox-[A-Z][A-Za-z]*(?:-[A-Z][A-Za-z]*)*)\b`)
	query := regexp.MustCompile(`/mcp\?([a-z_]+)=`)
	seen := map[string]bool{}
	for path, text := range recipeFiles(t) {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		for _, m := range meta.FindAllStringSubmatch(text, -1) {
			seen[m[1]] = true
			require.Contains(t, []string{mcpserver.MetaConversationID, mcpserver.MetaToolCallID, "oncebox/op_id", "oncebox/status", "oncebox/replayed"},
				m[1], "%s: _meta key %q", path, m[1])
		}
		for _, m := range header.FindAllStringSubmatch(text, -1) {
			seen[m[1]] = true
			// A recipe sends the conversation's header; the examples' README also names the
			// header oncebox sends a catalog target (vendors/webhook sets Oncebox-Op).
			require.Contains(t, []string{mcpserver.HeaderConversationID, "Oncebox-Op"}, m[1], "%s: header %q", path, m[1])
		}
		for _, m := range query.FindAllStringSubmatch(text, -1) {
			seen[m[1]] = true
			require.Equal(t, mcpserver.QueryConversationID, m[1], "%s: query parameter %q", path, m[1])
		}
	}
	for _, name := range []string{mcpserver.MetaConversationID, mcpserver.HeaderConversationID, mcpserver.QueryConversationID} {
		require.True(t, seen[name], "no recipe shows %q", name)
	}
}

// TestCustomVendorUsageSendsAKey: the custom vendor's usage shows the Idempotency-Key
// header POST /v1/ops requires.
func TestCustomVendorUsageSendsAKey(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("custom-vendor/main.go")
	require.NoError(t, err)
	doc, _, _ := strings.Cut(string(b), "package main")
	require.Contains(t, doc, `-H "Idempotency-Key: `)
	require.Contains(t, doc, "/v1/ops")
}

// TestClaudeDesktopRemoteBridge: the Claude Desktop recipe shows mcp-remote with its
// header syntax (Name:value, the value from env).
func TestClaudeDesktopRemoteBridge(t *testing.T) {
	t.Parallel()
	files := recipeFiles(t)
	cfg := files["claude-desktop/claude_desktop_config.remote.json"]
	require.Contains(t, cfg, `"mcp-remote@`)
	require.Contains(t, cfg, `"--header",`)
	require.Contains(t, cfg, `"Authorization:${ONCEBOX_AUTH_HEADER}"`)
	require.Contains(t, files["claude-desktop/README.md"], "mcp-remote")
}

// TestAgentFrameworkRecipesArePinned: the agent framework recipes install exact versions
// (npm ci from package-lock.json), and each framework CI runs has its recipe, its scripted
// model and a README.
func TestAgentFrameworkRecipesArePinned(t *testing.T) {
	t.Parallel()
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var lock struct {
		Packages map[string]struct {
			Version      string            `json:"version"`
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	b, err := os.ReadFile("agent-frameworks/package.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	b, err = os.ReadFile("agent-frameworks/package-lock.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &lock))
	exact := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	require.NotEmpty(t, pkg.Dependencies)
	require.Equal(t, pkg.Dependencies, lock.Packages[""].Dependencies, "package-lock.json is not package.json's")
	for name, version := range pkg.Dependencies {
		require.Regexp(t, exact, version, "%s is not pinned to an exact version", name)
		require.Equal(t, version, lock.Packages["node_modules/"+name].Version, "the lock installs another %s", name)
	}
	ci, err := os.ReadFile("agent-frameworks/ci.mjs")
	require.NoError(t, err)
	for _, f := range []string{"ai-sdk", "langchain-js", "openai-agents-js", "mastra"} {
		require.Contains(t, string(ci), fmt.Sprintf("./%s/agent.mjs", f), "ci.mjs does not run %s", f)
		for _, file := range []string{"agent.mjs", "scripted.mjs", "README.md"} {
			_, err := os.Stat(filepath.Join("agent-frameworks", f, file))
			require.NoError(t, err)
		}
	}
}

// TestTypeScriptRecipeRunsAsItsReadmeSays: the TypeScript recipe has a README whose
// commands are install and `npm run example`, and `npm run example` builds first (a
// pre-script), so a fresh clone never runs a dist/ that is not there.
func TestTypeScriptRecipeRunsAsItsReadmeSays(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("typescript", "README.md"))
	require.NoError(t, err, "examples/typescript has a README")
	require.Contains(t, string(readme), "npm run example")
	require.NotContains(t, string(readme), "npm run build &&", "no build step the reader must remember")
	b, err := os.ReadFile(filepath.Join("typescript", "package.json"))
	require.NoError(t, err)
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	require.NoError(t, json.Unmarshal(b, &pkg))
	require.Contains(t, pkg.Scripts["example"], "dist/")
	require.Equal(t, "npm run build", pkg.Scripts["preexample"], "npm run example builds dist/ first")
	require.Equal(t, "npm run build", pkg.Scripts["preci"], "npm run ci builds dist/ first")
}
