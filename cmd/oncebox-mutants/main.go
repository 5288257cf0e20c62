// Command oncebox-mutants runs the named mutants of testkit/mutants: each
// patch breaks one critical invariant in a scratch copy of the module, and the
// tests named for it must fail. It exits 1 when a mutant survives, its patch no
// longer applies or it does not build, and 2 when it could not run.
//
//	go run ./cmd/oncebox-mutants [--only name,name] [--list] [--apply-only] [--timeout 4m] [--keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/oncebox/oncebox/testkit/mutants"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("oncebox-mutants", flag.ContinueOnError)
	only := fs.String("only", "", "comma-separated names of the mutants to run (default: all)")
	list := fs.Bool("list", false, "list the mutants and the tests that must kill them, and exit")
	timeout := fs.Duration("timeout", 4*time.Minute, "bound on the tests of one mutant")
	keep := fs.Bool("keep", false, "keep the scratch copy")
	applyOnly := fs.Bool("apply-only", false, "only check that every patch applies to the code, without running tests")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	all := mutants.List()
	if *list {
		for _, m := range all {
			fmt.Printf("%-34s %s\n    %s; killed by %s in %s\n", m.Name, m.File, m.Breaks, strings.Join(m.Tests, ", "), strings.Join(m.Packages, " "))
		}
		return 0
	}
	selected := all
	if *only != "" {
		names := strings.Split(*only, ",")
		selected = nil
		for _, m := range all {
			if slices.Contains(names, m.Name) {
				selected = append(selected, m)
			}
		}
		if len(selected) != len(names) {
			fmt.Fprintf(os.Stderr, "oncebox-mutants: --only names %d mutants, %d exist (see --list)\n", len(names), len(selected))
			return 2
		}
	}
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		fmt.Fprintln(os.Stderr, "oncebox-mutants: run it inside the oncebox module (go run ./cmd/oncebox-mutants)")
		return 2
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if *applyOnly {
		errs := mutants.CheckApply(root, selected)
		for _, err := range errs {
			fmt.Println(err)
		}
		fmt.Printf("mutants: %d of %d patches apply\n", len(selected)-len(errs), len(selected))
		if len(errs) > 0 {
			return 1
		}
		return 0
	}
	t0 := time.Now()
	results, err := mutants.Run(ctx, mutants.Config{Root: root, Mutants: selected,
		Timeout: *timeout, Out: os.Stdout, Keep: *keep})
	if err != nil {
		fmt.Println("mutants: error:", err)
		return 2
	}
	bad := 0
	for _, r := range results {
		if r.Verdict != mutants.Killed {
			bad++
		}
	}
	fmt.Printf("mutants: %d killed, %d not (survived, no longer apply or do not build) of %d in %s\n",
		len(results)-bad, bad, len(results), time.Since(t0).Round(time.Second))
	if bad > 0 {
		return 1
	}
	return 0
}
