package mcpupstream

import "syscall"

// procAttr puts a stdio upstream's program in a process group of its own (a
// Ctrl-C meant for oncebox reaches oncebox, which then ends it cleanly) and has the
// kernel send it SIGTERM should oncebox die without ending it (killed, crashed): no
// upstream outlives the oncebox that started it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
