package mcpupstream

import "syscall"

// procAttr is nil on Windows: the program is started as os/exec does.
func procAttr() *syscall.SysProcAttr { return nil }
