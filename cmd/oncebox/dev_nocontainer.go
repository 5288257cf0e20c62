//go:build !devcontainer

package main

import "github.com/oncebox/oncebox/devkit/localpg"

// containerFallback is nil in a build without -tags devcontainer: the production binary
// carries no test code (testcontainers-go links testing and testify). `oncebox dev` on
// a machine with Docker and no PostgreSQL server binaries then says how to build with
// the fallback.
func containerFallback() localpg.ContainerFunc { return nil }
