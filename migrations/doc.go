// Package migrations holds oncebox's numbered SQL migrations, embedded in the binary, and
// applies them together with River's own schema (through rivermigrate, never copied).
//
// Files are named NNN_name.up.sql. Migrate takes a transaction-scoped advisory lock, so two
// processes migrating at once queue up instead of failing, and a second run is a no-op.
package migrations
