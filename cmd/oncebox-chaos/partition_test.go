package main

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireNetns skips the test unless it may make network namespaces (root, ip, bash).
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	for _, bin := range []string{"ip", "bash", "timeout"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("no %s", bin)
		}
	}
}

// TestNetnsCutsALink: a process in the harness's namespace reaches a host listener on
// the host side of a link; with the link down its connection attempt stalls (no
// refusal: it times out), and with the link up again it connects. Closing the
// namespace removes it and its links.
func TestNetnsCutsALink(t *testing.T) {
	requireNetns(t)
	ctx := t.Context()
	ns, err := newNetns(ctx, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			ns.close()
		}
	})
	l, err := net.Listen("tcp", net.JoinHostPort(ns.hostAddr(pathPostgres).String(), "0"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	connect := func() error {
		return exec.CommandContext(ctx, "ip", "netns", "exec", ns.name, "timeout", "2", "bash", "-c",
			"exec 3<>/dev/tcp/"+ns.hostAddr(pathPostgres).String()+"/"+port).Run()
	}
	require.NoError(t, connect(), "the link is up")
	require.NoError(t, ns.setLink(ctx, pathPostgres, false))
	t0 := time.Now()
	require.Error(t, connect(), "the link is down")
	require.GreaterOrEqual(t, time.Since(t0), 2*time.Second, "a stall, not a refusal")
	require.NoError(t, ns.setLink(ctx, pathPostgres, true))
	// The link's carrier and the peer's neighbour entry (failed while the link was
	// down) come back within moments.
	require.Eventually(t, func() bool { return connect() == nil }, 15*time.Second, 200*time.Millisecond, "the link is back")

	ns.close()
	closed = true
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	require.NotContains(t, string(out), ns.name)
	_, err = net.InterfaceByName(ns.links[pathPostgres].host)
	require.Error(t, err, "the links went with the namespace")
}

// TestRemoveStaleNetns: the namespace of a harness that is gone is deleted.
func TestRemoveStaleNetns(t *testing.T) {
	requireNetns(t)
	pid := 4194000
	for syscall.Kill(pid, 0) != syscall.ESRCH {
		pid++
	}
	name := netnsPrefix + strconv.Itoa(pid)
	require.NoError(t, ipCmd(t.Context(), "netns", "add", name))
	t.Cleanup(func() { _ = ipCmd(context.Background(), "netns", "del", name) })
	removeStaleNetns(t.Context(), slog.New(slog.DiscardHandler))
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	require.NotContains(t, string(out), name)
}

// TestFreeBlockAvoidsUsedAddresses: the links' /24 lies in 10.231.0.0/16 and holds no
// address of this host.
func TestFreeBlockAvoidsUsedAddresses(t *testing.T) {
	block, err := freeBlock(os.Getpid())
	require.NoError(t, err)
	require.True(t, netip.MustParsePrefix("10.231.0.0/16").Contains(block.Addr()))
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.(*net.IPNet).IP)
		require.False(t, block.Contains(ip.Unmap()), "%s is in use", ip)
	}
}
