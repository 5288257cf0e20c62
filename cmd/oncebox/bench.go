package main

import (
	"context"
	"errors"
)

func runBench(ctx context.Context, args []string) error {
	return errors.New("oncebox bench: run `make bench` (go test -bench in ./bench) for now")
}
