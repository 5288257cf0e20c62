// Package mutants applies named mutants, small patches that each break one
// critical invariant of oncebox, to a scratch copy of the module, and runs the
// tests that are expected to kill each of them. A mutant that survives (its
// tests still pass) is an invariant no test defends; a mutant whose patch no
// longer applies, or that no longer builds, is drift between the list and the
// code: both fail the run, loudly.
//
// `make mutants` (go run ./cmd/oncebox-mutants) runs the list in List.
package mutants

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Mutant is one small patch to the code and the tests that must catch it.
type Mutant struct {
	// Name identifies the mutant, such as "fence-token".
	Name string
	// Breaks says, in one sentence, which promise the patch breaks.
	Breaks string
	// File is the file patched, relative to the module root.
	File string
	// Old is the exact text replaced; it must occur exactly once in File.
	Old string
	// New replaces Old.
	New string
	// Packages are the packages whose tests run, such as "./outbox/".
	Packages []string
	// Tests are the names of the top-level tests expected to kill the mutant;
	// they run with -run '^(A|B)$'.
	Tests []string
}

// runPattern is the -run pattern of tests.
func runPattern(tests []string) string {
	quoted := make([]string, len(tests))
	for i, t := range tests {
		quoted[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(quoted, "|") + ")$"
}

// Verdict is what became of one mutant.
type Verdict string

// The verdicts of a mutant. Only Killed is good.
const (
	Killed     Verdict = "killed"
	Survived   Verdict = "SURVIVED"
	NoApply    Verdict = "PATCH DOES NOT APPLY"
	NoBuild    Verdict = "DOES NOT BUILD"
	TimedOut   Verdict = "TIMED OUT"
	RunFailure Verdict = "COULD NOT RUN"
)

// Result is one mutant's verdict.
type Result struct {
	Mutant  Mutant
	Verdict Verdict
	Took    time.Duration
	// Output is the tail of the test output, kept for a bad verdict.
	Output string
}

// Config configures a Run.
type Config struct {
	// Root is the module root to copy. Required.
	Root string
	// Mutants are the mutants to run. Required.
	Mutants []Mutant
	// Timeout bounds the tests of one mutant (and the baseline of one
	// package). Defaults to 4 minutes.
	Timeout time.Duration
	// Out receives one line per step. Defaults to io.Discard.
	Out io.Writer
	// Keep keeps the scratch copy and prints where it is.
	Keep bool
}

// Run copies the module to a scratch folder, checks that every mutant's tests
// pass on the unpatched copy (a test that fails anyway kills nothing), then
// applies each mutant in turn, runs its tests and restores the file. It returns
// every mutant's result; err is set when the run itself could not go on (the
// copy failed, or a baseline test failed).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 4 * time.Minute
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	scratch, err := os.MkdirTemp("", "oncebox-mutants-")
	if err != nil {
		return nil, fmt.Errorf("mutants: scratch folder: %w", err)
	}
	if cfg.Keep {
		fmt.Fprintln(cfg.Out, "mutants: scratch copy kept in", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}
	if err := copyTree(cfg.Root, scratch); err != nil {
		return nil, fmt.Errorf("mutants: copy the module: %w", err)
	}

	// Baseline: every package's tests, unpatched, once.
	byPkg := map[string][]string{}
	var pkgs []string
	for _, m := range cfg.Mutants {
		for _, p := range m.Packages {
			if _, ok := byPkg[p]; !ok {
				pkgs = append(pkgs, p)
			}
			for _, t := range m.Tests {
				if !slices.Contains(byPkg[p], t) {
					byPkg[p] = append(byPkg[p], t)
				}
			}
		}
	}
	for _, p := range pkgs {
		t0 := time.Now()
		out, err := goTest(ctx, scratch, cfg.Timeout, []string{p}, byPkg[p])
		if err != nil {
			return nil, fmt.Errorf("mutants: baseline: the tests of %s fail without any mutant, so they prove nothing:\n%s", p, tail(out))
		}
		fmt.Fprintf(cfg.Out, "baseline  %-40s passes unpatched (%s)\n", p, time.Since(t0).Round(time.Second))
	}

	var results []Result
	for _, m := range cfg.Mutants {
		r := runOne(ctx, scratch, cfg.Timeout, m)
		results = append(results, r)
		fmt.Fprintf(cfg.Out, "%-8s  %-34s %s (%s) by %s\n", r.Verdict, m.Name, m.File, r.Took.Round(time.Second), strings.Join(m.Tests, ", "))
		if r.Verdict != Killed && r.Output != "" {
			fmt.Fprintln(cfg.Out, indent(r.Output))
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}
	return results, nil
}

// CheckApply reports, for each mutant whose patch does not apply to the module at
// root (its Old text does not occur exactly once in its File), why. It runs no test:
// it is the quick check that the list still matches the code.
func CheckApply(root string, ms []Mutant) []error {
	var errs []error
	for _, m := range ms {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
		if err != nil {
			errs = append(errs, fmt.Errorf("mutant %s: %w", m.Name, err))
			continue
		}
		if n := bytes.Count(b, []byte(m.Old)); n != 1 {
			errs = append(errs, fmt.Errorf("mutant %s: %s", m.Name, reanchor(root, m, n)))
		}
	}
	return errs
}

// reanchor says why m's patch does not apply to the module at root (its Old text occurs
// n times in its File) and how to re-anchor it: the files of the module where the text
// is now, when it moved whole, and the commands that find and check the new anchor.
func reanchor(root string, m Mutant, n int) string {
	var moved []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".sql") {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Count(b, []byte(m.Old)) == 1 {
			if rel, err := filepath.Rel(root, path); err == nil && filepath.ToSlash(rel) != m.File {
				moved = append(moved, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	first, _, _ := strings.Cut(strings.TrimSpace(m.Old), "\n")
	msg := fmt.Sprintf("the text to replace occurs %d times in %s (want exactly 1): the code moved or changed. ", n, m.File)
	if len(moved) > 0 {
		msg += fmt.Sprintf("The text is now in %s: set the mutant's File to it. ", strings.Join(moved, ", "))
	} else {
		msg += fmt.Sprintf("Find where it went (git log -S %q --oneline -- %s), then set the mutant's File, Old and New to the code that keeps the invariant now. ", first, m.File)
	}
	return msg + fmt.Sprintf("Re-anchor it in testkit/mutants/list.go, never drop it; check with go run ./cmd/oncebox-mutants -apply-only -only %s, then run it with -only %s.", m.Name, m.Name)
}

// runOne applies m in the scratch copy, runs its tests and restores the file.
func runOne(ctx context.Context, scratch string, timeout time.Duration, m Mutant) Result {
	t0 := time.Now()
	res := Result{Mutant: m}
	path := filepath.Join(scratch, filepath.FromSlash(m.File))
	orig, err := os.ReadFile(path)
	if err != nil {
		res.Verdict, res.Output = NoApply, err.Error()
		return res
	}
	if n := bytes.Count(orig, []byte(m.Old)); n != 1 {
		res.Verdict = NoApply
		res.Output = reanchor(scratch, m, n)
		return res
	}
	mutated := bytes.Replace(orig, []byte(m.Old), []byte(m.New), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		res.Verdict, res.Output = RunFailure, err.Error()
		return res
	}
	defer func() { _ = os.WriteFile(path, orig, 0o644) }()

	out, err := goTest(ctx, scratch, timeout, m.Packages, m.Tests)
	res.Took = time.Since(t0)
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.Verdict, res.Output = Survived, "every test passed with the mutant in place:\n"+tail(out)
	case errors.Is(err, context.DeadlineExceeded):
		res.Verdict, res.Output = TimedOut, tail(out)
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		res.Verdict, res.Output = NoBuild, tail(out)
	case bytes.Contains(out, []byte("testing: warning: no tests to run")) || !bytes.Contains(out, []byte("--- FAIL")):
		// Failing without a failed test (no test matched, a vet error) proves nothing.
		res.Verdict, res.Output = RunFailure, tail(out)
	case errors.As(err, &exitErr):
		res.Verdict = Killed
	default:
		res.Verdict, res.Output = RunFailure, err.Error()+"\n"+tail(out)
	}
	return res
}

// goTest runs the tests named in pkgs of the module at dir.
func goTest(ctx context.Context, dir string, timeout time.Duration, pkgs, tests []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append([]string{"test", "-count=1", "-vet=off", "-run", runPattern(tests)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if err == nil && bytes.Contains(out, []byte("no tests to run")) {
		return out, errors.New("no test matched")
	}
	return out, err
}

// copyTree copies the module at src into dst, without version control or
// build output.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || rel == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return nil // symlinks and the like are not part of the module's code
	})
}

// tail returns the last lines of out.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 30 {
		lines = append([]string{"..."}, lines[len(lines)-30:]...)
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
