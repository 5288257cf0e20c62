package catalog

import "syscall"

// upstreamProcAttr is nil on Windows: the program is started as os/exec does.
func upstreamProcAttr() *syscall.SysProcAttr { return nil }
