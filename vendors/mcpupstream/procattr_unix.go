//go:build unix && !linux

package mcpupstream

import "syscall"

// procAttr puts a stdio upstream's program in a process group of its own (a
// Ctrl-C meant for oncebox reaches oncebox, which then ends it cleanly). Only Linux
// can also have the kernel end it should oncebox die first.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
