//go:build unix

package localpg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// maxSlots is how many default data folders processes may use at once.
	maxSlots = 32
	// portAttempts is how often a start is retried when the free port was
	// taken by someone else between choosing it and binding it.
	portAttempts = 3
	// logTailLines is how much of the server log an error carries.
	logTailLines = 20
	// stopTimeout bounds a fast shutdown before it turns into an immediate one.
	stopTimeout = 20 * time.Second
	// crashGrace is how long a crash waits for the server's processes to notice the
	// postmaster's death before they are SIGKILLed as a group.
	crashGrace = 5 * time.Second
)

// osUser is the unprivileged user a root process runs initdb and postgres as.
type osUser struct {
	name     string
	uid, gid int
}

// cluster is a private postmaster started by this process.
type cluster struct {
	binDir  string
	dataDir string
	runAs   *osUser // nil: the current user
	lock    *os.File
	logger  *slog.Logger

	cmd     *exec.Cmd
	log     *tailBuffer
	exited  chan struct{}
	waitErr error // set before exited is closed
	port    int
	// fixedPort is Config.Port: the port to listen on, or 0 for a free one.
	fixedPort int
	// rememberPort is Config.RememberPort: try the port of the last start first.
	rememberPort bool
	// password is the superuser's password (see password_unix.go).
	password string
	// durable is Config.Durable.
	durable bool
	// networks is Config.Networks.
	networks []netip.Prefix
	// standbyOf is Config.StandbyOf.
	standbyOf string
}

func startPrivate(ctx context.Context, cfg Config, binDir string) (*Postgres, error) {
	runAs, err := unprivilegedUser()
	if err != nil {
		return nil, err
	}
	major, err := serverMajor(ctx, binDir)
	if err != nil {
		return nil, err
	}

	var (
		dataDir string
		lock    *os.File
	)
	if cfg.DataDir != "" {
		dataDir, lock, err = lockDataDir(cfg.DataDir, runAs)
	} else {
		dataDir, lock, err = lockSlot(runAs, major)
	}
	if err != nil {
		return nil, err
	}

	c := &cluster{binDir: binDir, dataDir: dataDir, runAs: runAs, lock: lock, logger: cfg.Logger, fixedPort: cfg.Port,
		rememberPort: cfg.RememberPort && cfg.Port == 0, durable: cfg.Durable, networks: cfg.Networks,
		standbyOf: cfg.StandbyOf}
	if err := c.start(ctx, cfg.Database); err != nil {
		_ = c.lock.Close()
		return nil, err
	}

	return &Postgres{
		URL:       c.url(cfg.Database),
		Source:    "private:" + binDir,
		DataDir:   dataDir,
		closeFunc: c.stop,
		crashFunc: c.crash,
	}, nil
}

func (c *cluster) url(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// start initialises the data folder when needed, stops a postmaster orphaned
// there by an earlier run, starts the server and creates database.
func (c *cluster) start(ctx context.Context, database string) error {
	convert := false
	_, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION"))
	if errors.Is(err, os.ErrNotExist) && c.standbyOf != "" {
		if err := c.baseBackup(ctx); err != nil {
			return err
		}
	} else if errors.Is(err, os.ErrNotExist) {
		// The password is kept (as pending) before initdb sets it, so that it is
		// never lost.
		c.password = newPassword()
		pending := c.passwordPath() + ".new"
		if err := writePassword(pending, c.password); err != nil {
			return err
		}
		if err := c.initdb(ctx); err != nil {
			return err
		}
		if err := os.Rename(pending, c.passwordPath()); err != nil {
			return fmt.Errorf("keep the Postgres password: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("inspect data folder: %w", err)
	} else {
		var ok bool
		if c.password, ok, err = readPassword(c.passwordPath()); err != nil {
			return err
		}
		if !ok {
			// Initialised with trust by an older oncebox (or its conversion was cut
			// short): convert it once the server runs.
			convert = true
			if c.password, ok, err = readPassword(c.passwordPath() + ".new"); err != nil {
				return err
			}
			if !ok {
				c.password = newPassword()
			}
		}
	}

	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
		c.stopOrphan(ctx)
	}

	for range portAttempts {
		err = c.startServer(ctx)
		// A fixed port taken by someone else stays taken: no point retrying.
		if err == nil || c.fixedPort != 0 || !c.log.Contains("could not create any TCP/IP sockets") {
			break
		}
	}
	if err != nil {
		return err
	}
	if convert {
		if err := c.convertToPassword(ctx); err != nil {
			_ = c.stop(context.WithoutCancel(ctx))
			return err
		}
	}

	if err := ensureDatabase(ctx, c.url("postgres"), database); err != nil {
		_ = c.stop(context.WithoutCancel(ctx))
		return err
	}
	c.logger.InfoContext(ctx, "started private Postgres",
		slog.String("bin_dir", c.binDir), slog.String("data_dir", c.dataDir), slog.Int("port", c.port))
	return nil
}

func (c *cluster) initdb(ctx context.Context) error {
	c.logger.InfoContext(ctx, "initialising Postgres data folder", slog.String("data_dir", c.dataDir))
	// initdb reads the password from a file the cluster's user can read, removed at once.
	pwfile := c.dataDir + ".initdb-pw"
	if err := os.WriteFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write initdb's password file: %w", err)
	}
	defer os.Remove(pwfile)
	if c.runAs != nil {
		if err := os.Chown(pwfile, c.runAs.uid, c.runAs.gid); err != nil {
			return fmt.Errorf("hand initdb's password file to %s: %w", c.runAs.name, err)
		}
	}
	cmd := c.command(ctx, "initdb", "-D", c.dataDir, "-U", "postgres", "-A", "scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--locale=C", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", c.dataDir, err, lastLines(string(out), logTailLines))
	}
	return nil
}

// stopOrphan stops a postmaster left running by a process that died without
// calling Close. This process holds the folder's lock, so no live process
// owns that postmaster any more.
func (c *cluster) stopOrphan(ctx context.Context) {
	if !isExecutable(filepath.Join(c.binDir, "pg_ctl")) {
		return
	}
	out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", "20").CombinedOutput()
	c.logger.InfoContext(ctx, "stopped a postmaster left behind by an earlier run",
		slog.String("data_dir", c.dataDir), slog.Any("error", err), slog.String("output", strings.TrimSpace(string(out))))
}

// startServer starts postgres on the fixed port, or else a free one, and
// waits until it answers.
func (c *cluster) startServer(ctx context.Context) error {
	c.log = newTailBuffer(16 << 10)
	c.exited = make(chan struct{})
	c.waitErr = nil
	port := c.fixedPort
	if port == 0 && c.rememberPort {
		if last, ok := c.lastPort(); ok && portFree(last) == nil {
			port = last
		}
	}
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	} else if err := portFree(port); err != nil {
		// Checked first: the readiness probe would otherwise reach whatever
		// server holds the port and take it for this one.
		return err
	}
	c.port = port

	// The fast settings (unit tests, `oncebox dev`) lose transactions in a crash;
	// Config.Durable turns all three on (chaos, durability tests).
	durability := "off"
	if c.durable {
		durability = "on"
	}
	listen, err := c.allowNetworks()
	if err != nil {
		return err
	}
	// Not CommandContext: the server outlives Start's context.
	cmd := c.command(context.WithoutCancel(ctx), "postgres",
		"-D", c.dataDir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses="+listen,
		"-c", "unix_socket_directories=",
		"-c", "fsync="+durability,
		"-c", "synchronous_commit="+durability,
		"-c", "full_page_writes="+durability,
		"-c", "max_connections=200",
	)
	cmd.Stdout = c.log
	cmd.Stderr = c.log
	// Its own process group: a terminal's Ctrl-C reaches this process, which
	// then calls Close, rather than the server directly.
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run postgres: %w", err)
	}
	c.cmd = cmd
	exited := c.exited
	go func() {
		c.waitErr = cmd.Wait()
		close(exited)
	}()

	if err := waitReady(ctx, c.url("postgres"), c.exited); err != nil {
		c.kill()
		return fmt.Errorf("start postgres on 127.0.0.1:%d: %w\nserver log:\n%s", port, err, c.log.Tail(logTailLines))
	}
	if c.rememberPort {
		if err := os.WriteFile(c.portPath(), []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
			c.logger.WarnContext(ctx, "could not remember the private Postgres port; the next start may pick another",
				slog.String("path", c.portPath()), slog.Any("error", err))
		}
	}
	return nil
}

// networksMark ends the pg_hba.conf rules written for Config.Networks, so that each
// start replaces those of the last.
const networksMark = "# localpg: Config.Networks"

// allowNetworks writes the pg_hba.conf rules of Config.Networks (password, as on
// loopback), replacing those of an earlier start, and returns the server's
// listen_addresses.
func (c *cluster) allowNetworks() (string, error) {
	hba := filepath.Join(c.dataDir, "pg_hba.conf")
	rules, err := os.ReadFile(hba)
	if err != nil {
		return "", fmt.Errorf("read pg_hba.conf: %w", err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(rules), "\n") {
		if !strings.HasSuffix(strings.TrimRight(line, "\n"), networksMark) && line != "" {
			kept = append(kept, line)
		}
	}
	listen := []string{"127.0.0.1"}
	for _, n := range c.networks {
		listen = append(listen, n.Addr().String())
		kept = append(kept, fmt.Sprintf("host all all %s scram-sha-256 %s\n", n.Masked(), networksMark))
	}
	if next := strings.Join(kept, ""); next != string(rules) {
		// os.WriteFile keeps the file's owner (the cluster's user, when run as root).
		if err := os.WriteFile(hba, []byte(next), 0o600); err != nil {
			return "", fmt.Errorf("write pg_hba.conf: %w", err)
		}
	}
	return strings.Join(listen, ","), nil
}

// portPath is where the port of the last start is remembered (Config.RememberPort).
func (c *cluster) portPath() string { return c.dataDir + ".port" }

// lastPort returns the remembered port of the last start, if any.
func (c *cluster) lastPort() (int, bool) {
	b, err := os.ReadFile(c.portPath())
	if err != nil {
		return 0, false
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return p, err == nil && p > 0 && p <= 65535
}

// stop asks the server for a fast shutdown, escalating to an immediate one,
// and releases the data folder.
func (c *cluster) stop(ctx context.Context) error {
	defer c.lock.Close()

	select {
	case <-c.exited:
		return fmt.Errorf("postgres had already exited: %w\nserver log:\n%s", c.waitErr, c.log.Tail(logTailLines))
	default:
	}

	_ = c.cmd.Process.Signal(syscall.SIGINT) // Fast shutdown.
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-c.exited:
		if c.waitErr != nil {
			return fmt.Errorf("postgres exited uncleanly: %w\nserver log:\n%s", c.waitErr, c.log.Tail(logTailLines))
		}
		c.logger.InfoContext(ctx, "stopped private Postgres", slog.String("data_dir", c.dataDir))
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	c.kill()
	return fmt.Errorf("postgres did not finish a fast shutdown in time and was stopped immediately")
}

// kill sends an immediate shutdown, then kills the server's process group
// when it does not exit within a few seconds, and waits for it.
// crash SIGKILLs the postmaster alone, as a crash would, waits until its backends
// (which notice the postmaster's death) are gone too, and releases the folder. Each
// backend leads its own process group (the postmaster makes it so), so they are
// listed first, with the postmaster stopped so that it forks none after the list. One
// that cannot notice within crashGrace, such as a backend asleep on a lock the killed
// WAL sender held, is SIGKILLed with its group, as the end of its machine would: until
// it is gone it holds the log pipe open, so the postmaster's Wait would not return.
func (c *cluster) crash(ctx context.Context) error {
	defer c.lock.Close()
	pid := c.cmd.Process.Pid
	_ = c.cmd.Process.Signal(syscall.SIGSTOP)
	children := childrenOf(pid)
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(crashGrace)
	for {
		alive := children[:0]
		for _, child := range children {
			if syscall.Kill(child, 0) == nil || syscall.Kill(-child, 0) == nil {
				alive = append(alive, child)
			}
		}
		children = alive
		select {
		case <-c.exited:
			if len(children) == 0 {
				c.logger.InfoContext(ctx, "crashed private Postgres (SIGKILL of the postmaster)", slog.String("data_dir", c.dataDir))
				return nil
			}
		default:
		}
		if time.Now().After(deadline) {
			for _, child := range children {
				_ = syscall.Kill(-child, syscall.SIGKILL)
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// childrenOf lists the processes whose parent is pid, from /proc (none where there is
// no /proc: a crash then waits for the backends to notice on their own).
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var children []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			children = append(children, n)
		}
	}
	return children
}

func (c *cluster) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
}

// command prepares a program of the server's bin folder to run as the
// cluster's user, from a folder that user can reach.
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = filepath.Dir(c.dataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if c.runAs != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.runAs.uid), Gid: uint32(c.runAs.gid)}
	}
	return cmd
}

// unprivilegedUser returns nil when the process is not root, and otherwise
// the user to run the server as: initdb and postgres refuse to run as root.
func unprivilegedUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, errUID := strconv.Atoi(u.Uid)
		gid, errGID := strconv.Atoi(u.Gid)
		if errUID != nil || errGID != nil {
			continue
		}
		return &osUser{name: name, uid: uid, gid: gid}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody user exists: run as an ordinary user or create a postgres system user")
}

// serverMajor returns the major version printed by postgres --version.
func serverMajor(ctx context.Context, binDir string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w", err)
	}
	// "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)"
	_, rest, ok := strings.Cut(string(out), ")")
	fields := strings.Fields(rest)
	if !ok || len(fields) == 0 {
		return "", fmt.Errorf("postgres --version printed %q, which has no version", strings.TrimSpace(string(out)))
	}
	parts := strings.Split(fields[0], ".")
	if n, err := strconv.Atoi(parts[0]); err == nil && n < 10 && len(parts) > 1 {
		return parts[0] + "." + parts[1], nil
	}
	return parts[0], nil
}

// lockSlot takes the first free default data folder of this major version.
func lockSlot(runAs *osUser, major string) (string, *os.File, error) {
	base, err := slotBase(runAs, major)
	if err != nil {
		return "", nil, err
	}
	for i := range maxSlots {
		dir := filepath.Join(base, "slot-"+strconv.Itoa(i))
		lock, err := tryLock(dir + ".lock")
		if err != nil {
			return "", nil, err
		}
		if lock == nil {
			continue
		}
		// A folder without PG_VERSION is left over from a failed initdb.
		if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
			if err := os.RemoveAll(dir); err != nil {
				_ = lock.Close()
				return "", nil, fmt.Errorf("clear data folder: %w", err)
			}
		}
		if err := mkdirOwned(dir, runAs); err != nil {
			_ = lock.Close()
			return "", nil, err
		}
		return dir, lock, nil
	}
	return "", nil, fmt.Errorf("all %d data folders under %s are in use by other processes", maxSlots, base)
}

// slotBase returns the folder holding the default data folders, creating it.
// As root it lies under os.TempDir() and belongs to the unprivileged user,
// since the user's own cache (/root/.cache) is not reachable by others.
func slotBase(runAs *osUser, major string) (string, error) {
	if runAs != nil {
		top := filepath.Join(os.TempDir(), "oncebox-localpg-"+runAs.name)
		if err := mkdirOwned(top, runAs); err != nil {
			return "", err
		}
		mine := filepath.Join(top, ownerKey(os.Getenv("HOME"), os.Getuid()))
		if err := mkdirOwned(mine, runAs); err != nil {
			return "", err
		}
		base := filepath.Join(mine, "pg"+major)
		return base, mkdirOwned(base, runAs)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = filepath.Join(os.TempDir(), "oncebox-localpg-"+strconv.Itoa(os.Getuid()))
	}
	base := filepath.Join(cache, "oncebox", "localpg", "pg"+major)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("create cache folder: %w", err)
	}
	return base, nil
}

// lockDataDir locks and prepares a data folder chosen by the caller.
func lockDataDir(dataDir string, runAs *osUser) (string, *os.File, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return "", nil, fmt.Errorf("data folder %s: %w", dataDir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, fmt.Errorf("create parent of data folder: %w", err)
	}
	if err := checkReachable(filepath.Dir(dir), runAs); err != nil {
		return "", nil, err
	}
	lock, err := tryLock(dir + ".lock")
	if err != nil {
		return "", nil, err
	}
	if lock == nil {
		return "", nil, fmt.Errorf("data folder %s is in use by another process: choose another DataDir or leave it empty", dir)
	}
	if err := mkdirOwned(dir, runAs); err != nil {
		_ = lock.Close()
		return "", nil, err
	}
	return dir, lock, nil
}

// checkReachable reports an error when runAs cannot traverse dir and every
// folder above it, which initdb and postgres need.
func checkReachable(dir string, runAs *osUser) error {
	if runAs == nil {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("inspect folder: %w", err)
		}
		perm := info.Mode().Perm()
		reachable := perm&0o001 != 0
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			reachable = reachable ||
				(int(st.Uid) == runAs.uid && perm&0o100 != 0) ||
				(int(st.Gid) == runAs.gid && perm&0o010 != 0)
		}
		if !reachable {
			return fmt.Errorf("the server runs as user %s, who cannot enter %s: choose a DataDir under %s or leave it empty", runAs.name, d, os.TempDir())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// mkdirOwned creates dir (mode 0700) unless it exists, and as root hands it
// to runAs. An existing folder must be a real directory owned by that user.
func mkdirOwned(dir string, runAs *osUser) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create folder: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("inspect folder: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("%s exists and is not a folder", dir)
	}
	if runAs == nil {
		return nil
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == runAs.uid {
		return nil
	}
	if err := os.Lchown(dir, runAs.uid, runAs.gid); err != nil {
		return fmt.Errorf("hand folder to user %s: %w", runAs.name, err)
	}
	return nil
}

// tryLock takes an exclusive lock on path without waiting. It returns a nil
// file when another process (or another Start in this one) holds the lock.
// Closing the file releases the lock.
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		_ = f.Close()
		return nil, nil
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// portFree reports an error when port of 127.0.0.1 cannot be bound.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d of 127.0.0.1 is in use: choose another Config.Port or leave it 0: %w", port, err)
	}
	return l.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ownerKey names the folder of one user's clusters under the shared temporary folder
// that root's clusters live in: the user's HOME (hashed, so that the path tells no
// name), else its uid. Two users of one machine, or root with two HOMEs, never share a
// cluster and its ops.
func ownerKey(home string, uid int) string {
	if home == "" {
		return "uid-" + strconv.Itoa(uid)
	}
	sum := sha256.Sum256([]byte(home))
	return "home-" + hex.EncodeToString(sum[:6])
}
