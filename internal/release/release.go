// Package release names the oncebox release a binary is: its version, the commit it was
// built from, and the highest migration it knows. Compatibility code exists only for what
// a release shipped (CHANGELOG.md lists the releases and the formats each one wrote).
package release

import (
	"runtime/debug"
)

// Base is the version of the code in this tree: the release it is, or the next release
// with "-dev" while that one is unreleased. CHANGELOG.md has one section per version.
const Base = "v0.4.0-dev"

// version overrides Base when a build sets it:
// go build -ldflags "-X github.com/oncebox/oncebox/internal/release.version=v0.2.0".
var version string

// commit overrides the VCS information when a build sets it (make build does, since Go
// embeds none in a git worktree): -ldflags "-X github.com/oncebox/oncebox/internal/release.commit=$(git rev-parse HEAD)".
var commit string

// Version returns the binary's version: the -ldflags value when the build set one, Base
// otherwise.
func Version() string {
	if version != "" {
		return version
	}
	return Base
}

// Commit returns the commit the binary was built from: the -ldflags value when the build
// set one, else the VCS information Go embeds in a `go build` inside a git checkout, with
// "-dirty" when the tree had changes; "unknown" when the build carries neither (go run,
// go test, -buildvcs=false, a git worktree).
func Commit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return commitOf(info.Settings)
}

// commitOf reads the commit from a build's settings.
func commitOf(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		return rev + "-dirty"
	}
	return rev
}
