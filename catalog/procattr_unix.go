//go:build unix && !linux

package catalog

import "syscall"

// upstreamProcAttr puts a stdio upstream's program in a process group of its own (a
// Ctrl-C meant for oncebox reaches oncebox, which then ends it cleanly). Only Linux
// can also have the kernel end it should oncebox die first.
func upstreamProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
