package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// serveProc is one `oncebox serve` process, which the harness kills and
// restarts under the same address and log file.
type serveProc struct {
	name string
	bin  string
	// addr is where the harness reaches the process's API; eventAddr where the fakes
	// post their events to it (addr but for a process in a network namespace, which the
	// fakes reach over its vendors link).
	addr, eventAddr string
	// netns, when set, is the network namespace the process runs in (ip netns exec,
	// which execs: the process keeps the pid the harness started).
	netns   string
	env     []string
	logPath string
	logger  *slog.Logger

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool // the harness stopped it on purpose
	paused bool // stopped by SIGSTOP until pauseFor resumes it
	// spared counts the faults under way that want the process alive (a pause, a
	// partition): no SIGKILL meanwhile.
	spared  int
	exitErr error
	logFile *os.File
}

// base returns the process's API base URL.
func (p *serveProc) base() string { return "http://" + p.addr }

// start starts the process; it does not wait for it to answer.
func (p *serveProc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isDone(p.done) {
		return fmt.Errorf("%s is already running", p.name)
	}
	if p.logFile == nil {
		f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open log of %s: %w", p.name, err)
		}
		p.logFile = f
	}
	fmt.Fprintf(p.logFile, "---- chaos: starting %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	fmt.Fprintf(p.logFile, "---- chaos: binary %s\n", p.bin)
	cmd := exec.Command(p.bin, "serve")
	if p.netns != "" {
		cmd = exec.Command("ip", "netns", "exec", p.netns, p.bin, "serve")
	}
	cmd.Env = p.env
	cmd.Stdout = p.logFile
	cmd.Stderr = p.logFile
	// Its own process group, so a terminal's Ctrl-C reaches only the harness,
	// which then stops everything; killed with the harness if it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.killed, p.exitErr = cmd, done, false, nil
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		killed := p.killed
		p.mu.Unlock()
		close(done)
		if !killed {
			p.logger.Warn("serve process exited by itself", slog.String("proc", p.name), slog.Any("error", err))
		}
	}()
	return nil
}

// setBin makes the process's next start run bin.
func (p *serveProc) setBin(bin string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bin = bin
}

// exitedByItself reports whether the process is down without the harness
// having stopped it.
func (p *serveProc) exitedByItself() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && isDone(p.done) && !p.killed
}

// running reports whether the process is up.
func (p *serveProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isDone(p.done)
}

// signal sends sig and waits up to wait for the process to exit, then kills
// it. It does nothing when the process is not running.
func (p *serveProc) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	if p.cmd == nil || isDone(p.done) {
		p.mu.Unlock()
		return
	}
	p.killed = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return
	case <-time.After(wait):
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// pauseFor stops the process and its children (SIGSTOP to its process group) for d,
// or until ctx ends, then resumes them (SIGCONT): a process that is alive but silent,
// as in a long GC pause or a frozen VM. It returns false when the process was not
// running.
func (p *serveProc) pauseFor(ctx context.Context, d time.Duration) bool {
	p.mu.Lock()
	if p.cmd == nil || isDone(p.done) {
		p.mu.Unlock()
		return false
	}
	pid := p.cmd.Process.Pid
	p.paused = true
	p.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGSTOP)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	return true
}

// spare and unspare bracket a fault that wants the process alive.
func (p *serveProc) spare() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spared++
}

func (p *serveProc) unspare() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spared--
}

// killable reports whether the kill loops may SIGKILL the process: it runs, is not
// paused, and no fault that wants it alive is under way (spare). A pause and a
// partition are meant to cut a live process, which must recover when it wakes up or
// its link is back; a process killed while cut off from Postgres is another fault (its
// sessions end only when the link is back within the kernel's FIN retries, about
// 100 s, or else at TCP keepalive), not one this harness plans.
func (p *serveProc) killable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isDone(p.done) && !p.paused && p.spared == 0
}

// kill SIGKILLs the process, as a crash would.
func (p *serveProc) kill() { p.signal(syscall.SIGKILL, 5*time.Second) }

// stop asks the process to shut down (SIGTERM) and kills it after wait.
func (p *serveProc) stop(wait time.Duration) { p.signal(syscall.SIGTERM, wait) }

// closeLog closes the log file after the process is down.
func (p *serveProc) closeLog() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.logFile != nil {
		_ = p.logFile.Close()
		p.logFile = nil
	}
}

// waitHealthy polls /healthz until it answers 200, the process exits, or
// ctx ends.
func (p *serveProc) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		if done != nil && isDone(done) {
			return fmt.Errorf("%s exited before it was healthy (log %s): %w", p.name, p.logPath, p.exitErr)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base()+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy within %s (log %s): %w", p.name, timeout, p.logPath, errors.Join(ctx.Err(), err))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
