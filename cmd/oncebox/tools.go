package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/oncebox/oncebox/vendors/catalog"
)

// runTools is `oncebox tools check NAME --args JSON`: the retry scenarios of a catalog
// tool against its real target. It sends real requests; it needs no database. It exits
// 1 when its verdict contradicts the file (native_keys: true on a target where a
// reused key made other than one object), and runs on a target without lookup_path,
// saying what it could not check.
func runTools(ctx context.Context, args []string) error {
	return runToolsTo(ctx, args, os.Stdout)
}

func runToolsTo(ctx context.Context, args []string, out io.Writer) error {
	const usageLine = "usage: oncebox tools check NAME --args JSON [--tools-file F] [--settle 3s] [--timeout 10s] [--json]"
	if len(args) == 0 || args[0] != "check" {
		return &exitError{code: 2, err: errors.New(usageLine)}
	}
	fs := flag.NewFlagSet("tools check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	toolsFile := fs.String("tools-file", os.Getenv("ONCEBOX_TOOLS_FILE"), "the tool catalog (default $ONCEBOX_TOOLS_FILE)")
	argsJSON := fs.String("args", "", "the tool's arguments, a JSON object")
	settle := fs.Duration("settle", 3*time.Second, "how long to keep asking the lookup path after each scenario")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of each request")
	asJSON := fs.Bool("json", false, "print JSON")
	// The tool's name may come before or after the flags.
	rest := args[1:]
	var name string
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, usageLine)
		fs.SetOutput(os.Stderr)
		fs.PrintDefaults()
		return err
	} else if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("%w\n%s", err, usageLine)}
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() != 0 || name == "" {
		return &exitError{code: 2, err: errors.New(usageLine)}
	}
	if *toolsFile == "" {
		return &exitError{code: 2, err: errors.New("no tool catalog: set --tools-file or ONCEBOX_TOOLS_FILE")}
	}
	if *argsJSON == "" || !json.Valid([]byte(*argsJSON)) {
		return &exitError{code: 2, err: errors.New("--args must be the tool's arguments as a JSON object")}
	}
	cat, err := catalog.Load(*toolsFile, nil)
	if err != nil {
		return err
	}
	rt, err := cat.Connect(catalog.Options{Timeout: *timeout})
	if err != nil {
		return err
	}
	rep, err := rt.Check(ctx, name, json.RawMessage(*argsJSON), catalog.CheckOptions{Settle: *settle, Timeout: *timeout})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		_, err = io.WriteString(out, rep.String())
	}
	if err != nil {
		return err
	}
	if c := rep.Contradiction(); c != "" {
		// A check in CI fails when the file claims what the target does not do.
		return &exitError{code: 1, err: errors.New("tools check: " + c)}
	}
	return nil
}
