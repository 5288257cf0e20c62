//go:build devcontainer

package main

import (
	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/devkit/pgcontainer"
)

// containerFallback is how `oncebox dev` starts Postgres in Docker when the machine has
// no PostgreSQL server binaries. testcontainers-go links the testing package and
// testify, so only a build with -tags devcontainer has it (make dev).
func containerFallback() localpg.ContainerFunc { return pgcontainer.Start }
