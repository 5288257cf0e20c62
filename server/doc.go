// Package server wires oncebox together: the outbox and its River workers, the vendor
// adapters, the reconciler, the HTTP API, the MCP server, metrics and River UI. It is
// the Main of the oncebox binary (cmd/oncebox parses flags into a Config and calls Run),
// and end-to-end tests use it the same way.
package server
