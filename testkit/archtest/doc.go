// Package archtest holds the tests that keep the layout what docs/architecture.md says:
// the package map (every package listed, every import allowed by its row, no arrow
// back up), and short functions. It has no code of its own; run
//
//	go test -run TestCounts -v ./testkit/archtest
//
// for the counts a refactor of the layout watches: the exported identifiers of package
// outbox, the functions over 80 lines, and the import arrows that run back up the map.
package archtest
