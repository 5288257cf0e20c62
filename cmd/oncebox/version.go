package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/oncebox/oncebox/internal/release"
	"github.com/oncebox/oncebox/migrations"
)

// versionInfo is what `oncebox version` reports.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Migration int    `json:"migration"`
}

// runVersion is `oncebox version`: the release, the commit and the highest migration
// this binary knows. It needs no database.
func runVersion(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	format := fs.String("format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: errors.New("usage: oncebox version [--format text|json]")}
	}
	info := versionInfo{Version: release.Version(), Commit: release.Commit(), Migration: migrations.Latest()}
	switch *format {
	case "json":
		return json.NewEncoder(os.Stdout).Encode(info)
	case "text":
		fmt.Printf("oncebox %s\ncommit %s\nmigration %03d\n", info.Version, info.Commit, info.Migration)
		return nil
	default:
		return &exitError{code: 2, err: fmt.Errorf("--format %q: want text or json", *format)}
	}
}
