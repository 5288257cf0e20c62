package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A partitioned serve process runs in a network namespace of its own, joined to the
// host by one veth pair per path, so that each path can be cut alone: taking the host
// side of a pair down stalls the process's established connections over it without a
// reset, and its new ones get no answer (they fail after the dial's or ARP's timeout),
// as in a network partition; bringing it up lets them go on. `tc netem` is not needed (nor available on every kernel): link down is.

// netnsPrefix starts the name of the harness's network namespaces:
// oncebox-chaos-<pid>. A namespace whose harness is gone is deleted at the next run.
const netnsPrefix = "oncebox-chaos-"

// hostLinkName matches the host side of a harness's veth pair: oc<pid><path letter>.
var hostLinkName = regexp.MustCompile(`^oc([0-9]+)[pva]$`)

// path is one of a namespaced process's links.
type path int

const (
	pathPostgres path = iota // the serve process to Postgres
	pathVendors              // to the fake vendors, and their events back
	pathAPI                  // the harness's API calls (never cut)
	paths
)

func (p path) String() string { return [...]string{"postgres", "vendors", "api"}[p] }

// letter names the path in its host-side link name.
func (p path) letter() byte { return "pva"[p] }

// Partition lengths: the Postgres link is down longer than the job timeout (3s) and
// --rescue-after (10s) of serveEnv, as a pause is; the vendors' longer than the job
// timeout and the vendor timeouts (2s).
const (
	pgPartitionLength      = pauseLength
	vendorPartitionLength  = 5 * time.Second
	vendorPartitionAtShare = 10 // a tenth into the chaos
)

// veth is one path's pair: host in the root namespace, peer in the process's.
type veth struct {
	host, peer         string
	hostAddr, peerAddr netip.Prefix
}

// netns is the network namespace of one serve process and its links.
type netns struct {
	name   string
	links  [paths]veth
	logger *slog.Logger
}

// ipCmd runs ip with args and returns an error carrying its output.
func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns makes the namespace of this harness and its three links, on a /24 of
// 10.231.0.0/16 that no interface of the host uses: each path a /30, the host side
// .1, .5 or .9, the process's side one above.
func newNetns(ctx context.Context, logger *slog.Logger) (*netns, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not root: network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("no ip command (iproute2): %w", err)
	}
	removeStaleNetns(ctx, logger)
	block, err := freeBlock(os.Getpid())
	if err != nil {
		return nil, err
	}
	pid := os.Getpid()
	n := &netns{name: netnsPrefix + strconv.Itoa(pid), logger: logger}
	for p := range paths {
		base := block.Addr().As4()
		base[3] = byte(4*int(p) + 1)
		host := netip.AddrFrom4(base)
		n.links[p] = veth{host: fmt.Sprintf("oc%d%c", pid, p.letter()), peer: p.String(),
			hostAddr: netip.PrefixFrom(host, 30), peerAddr: netip.PrefixFrom(host.Next(), 30)}
	}
	steps := [][]string{{"netns", "add", n.name}, {"-n", n.name, "link", "set", "lo", "up"}}
	for _, l := range n.links {
		steps = append(steps,
			[]string{"link", "add", l.host, "type", "veth", "peer", "name", l.peer, "netns", n.name},
			[]string{"addr", "add", l.hostAddr.String(), "dev", l.host},
			[]string{"link", "set", l.host, "up"},
			[]string{"-n", n.name, "addr", "add", l.peerAddr.String(), "dev", l.peer},
			[]string{"-n", n.name, "link", "set", l.peer, "up"})
	}
	for _, args := range steps {
		if err := ipCmd(ctx, args...); err != nil {
			n.close()
			return nil, err
		}
	}
	logger.Info("network namespace ready", slog.String("netns", n.name), slog.String("postgres_link", n.links[pathPostgres].hostAddr.String()),
		slog.String("vendors_link", n.links[pathVendors].hostAddr.String()), slog.String("api_link", n.links[pathAPI].hostAddr.String()))
	return n, nil
}

// freeBlock returns a /24 of 10.231.0.0/16, chosen from the pid, that no address of
// this host's interfaces lies in (another harness may run beside this one).
func freeBlock(pid int) (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list the host's addresses: %w", err)
	}
	for i := range 256 {
		block := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 231, byte((pid + i) % 256), 0}), 24)
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && block.Contains(ip.Unmap()) {
					used = true
				}
			}
		}
		if !used {
			return block, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /24 in 10.231.0.0/16 for the network namespace's links")
}

// removeStaleNetns deletes the namespaces and host links of harnesses that are gone
// (a run that crashed or was SIGKILLed).
func removeStaleNetns(ctx context.Context, logger *slog.Logger) {
	gone := func(pidText string) bool {
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			return false
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if pid, ok := strings.CutPrefix(name, netnsPrefix); ok && gone(pid) {
				err := ipCmd(ctx, "netns", "del", name)
				logger.Info("deleted the network namespace of an earlier run", slog.String("netns", name), slog.Any("error", err))
			}
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return
	}
	for _, iface := range ifaces {
		if m := hostLinkName.FindStringSubmatch(iface.Name); m != nil && gone(m[1]) {
			err := ipCmd(ctx, "link", "del", iface.Name)
			logger.Info("deleted a link of an earlier run", slog.String("link", iface.Name), slog.Any("error", err))
		}
	}
}

// hostAddr is the host side's address of p: where the process reaches Postgres or the
// fakes.
func (n *netns) hostAddr(p path) netip.Addr { return n.links[p].hostAddr.Addr() }

// peerAddr is the process's address on p: where the harness (API) and the fakes'
// events (vendors) reach it.
func (n *netns) peerAddr(p path) netip.Addr { return n.links[p].peerAddr.Addr() }

// setLink takes the host side of p down (up false) or brings it up again.
func (n *netns) setLink(ctx context.Context, p path, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipCmd(ctx, "link", "set", n.links[p].host, state)
}

// close deletes the namespace, and with it its veth pairs. The processes in it must
// be gone.
func (n *netns) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ipCmd(ctx, "netns", "del", n.name); err != nil {
		n.logger.Warn("delete the network namespace", slog.String("netns", n.name), slog.Any("error", err))
	}
	for _, l := range n.links {
		if _, err := net.InterfaceByName(l.host); err == nil {
			_ = ipCmd(ctx, "link", "del", l.host)
		}
	}
}

// ciRun reports whether the harness runs in CI (CI set, not to false), where a
// partition that cannot be made fails the run.
func ciRun() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// setupNetns makes the namespace of the partitioned serve process, or says why there
// is none: in CI that fails the run, elsewhere the partitions are skipped with a log
// line.
func (h *harness) setupNetns(ctx context.Context) error {
	switch {
	case !h.cfg.Partitions:
		h.partitionSkipped = "--partitions=false"
	case h.cfg.DatabaseURL != "":
		h.partitionSkipped = "--database-url names a Postgres that does not listen on the namespace's link"
	case h.cfg.UpgradeFrom != "":
		h.partitionSkipped = "a rolling upgrade run"
	case h.cfg.Failover != "":
		h.partitionSkipped = "a failover run (its standby listens on loopback only)"
	}
	if h.partitionSkipped != "" {
		h.logger.Info("network partitions skipped", slog.String("reason", h.partitionSkipped))
		return nil
	}
	ns, err := newNetns(ctx, h.logger)
	if err != nil {
		if ciRun() {
			return fmt.Errorf("network partitions: %w (CI is set: the chaos run must partition a serve process; run it as root with ip netns, or pass --partitions=false)", err)
		}
		h.partitionSkipped = err.Error()
		h.logger.Warn("network partitions skipped: no network namespace (in CI this fails the run)", slog.Any("error", err))
		return nil
	}
	h.ns = ns
	return nil
}

// partitionCalm is how long after a partition its process is spared the kills, so that
// its recovery (the pool's connections, River's client, the fences of its woken-up
// runs) is seen.
const partitionCalm = 8 * time.Second

// partition cuts p of the namespaced process for d, then brings it back. The process is
// up and healthy first (its connections established), and no kill reaches it from then
// until partitionCalm after the link is back. The partition lasts d even when the chaos
// ends meanwhile (ctx only ends it early on an interrupt), and counts itself once healed.
func (h *harness) partition(ctx context.Context, p path, d time.Duration) error {
	proc := h.procs[0]
	proc.spare()
	defer time.AfterFunc(partitionCalm, proc.unspare)
	if err := h.upAndHealthy(ctx, proc); err != nil {
		h.logger.Warn("partition: the process is not healthy; cutting it anyway", slog.String("proc", proc.name), slog.Any("error", err))
	}
	h.logger.Info("partition: link down", slog.String("proc", proc.name), slog.String("path", p.String()), slog.Duration("for", d))
	if err := h.ns.setLink(ctx, p, false); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	if err := h.ns.setLink(context.WithoutCancel(ctx), p, true); err != nil {
		return err
	}
	h.partitions[p].Add(1)
	h.logger.Info("partition: link up", slog.String("proc", proc.name), slog.String("path", p.String()))
	return nil
}

// upAndHealthy starts p if it is down and waits until it answers: a fault that wants
// a live process (spare) calls it first.
func (h *harness) upAndHealthy(ctx context.Context, p *serveProc) error {
	h.procMu.Lock()
	var err error
	if !p.running() {
		err = p.start()
	}
	h.procMu.Unlock()
	if err != nil {
		return err
	}
	return p.waitHealthy(ctx, 30*time.Second)
}

// vendorPartitionLoop cuts the namespaced process from the fake vendors a tenth into
// the chaos, for longer than its job and vendor timeouts: its calls in flight stall
// (sent or not: unknown, for the reconciler) and its new ones time out, as do the
// fakes' events to it (they go to the other process).
func (h *harness) vendorPartitionLoop(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(h.cfg.EnqueueFor / vendorPartitionAtShare):
	}
	return h.partition(ctx, pathVendors, vendorPartitionLength)
}

// partitionFigures are the partitions of the line of figures.
func (h *harness) partitionFigures() string {
	if h.ns == nil {
		return "partitions=skipped"
	}
	pg, vendors := h.partitions[pathPostgres].Load(), h.partitions[pathVendors].Load()
	return fmt.Sprintf("partitions=%d partitions_postgres=%d partitions_vendors=%d", pg+vendors, pg, vendors) + h.longCutFigures()
}
