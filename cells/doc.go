// Package cells spreads one installation's tenants over several Postgres clusters, its
// cells (docs/scaling.md): the directory that places each tenant in a cell (Directory,
// read from the home cell and cached by every process), the registration of a cell
// (AddCell: its number, and its identity sequences in that number's range), and the
// move of a tenant from one cell to another (Mover: drain, fence, wait for its work in
// flight, copy, switch, clean up). It never imports the core's rooms: a move works on
// the tables (tables.go names every one, and TestEveryTableDecided keeps the list
// whole); `server` routes calls with the directory.
package cells
