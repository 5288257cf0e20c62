package vendorhttp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Range is an address range an Egress policy refuses by default, with the name a
// person reads in a refusal.
type Range struct {
	Prefix netip.Prefix
	Name   string
}

// RefusedRanges are the ranges an Egress policy refuses unless it allows them: the
// host itself and the networks beside it, which a tenant's target or upstream must not
// reach (a metadata service, a database, oncebox's own API).
var RefusedRanges = []Range{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Egress is a policy on the addresses a transport connects to: every address of
// RefusedRanges is refused, unless one of Allow holds it. The zero value refuses them
// all.
type Egress struct {
	// Allow are the ranges allowed although RefusedRanges holds them, such as
	// 10.1.0.0/16 for an internal service. Defaults to none.
	Allow []netip.Prefix
	// Who names, in a refusal, whose request it was, such as "tenant acme's target
	// crm". Optional.
	Who string
}

// EgressError is a connection an Egress policy refused, before it was attempted.
type EgressError struct {
	// Addr is the address refused; Range the refused range holding it.
	Addr  netip.Addr
	Range Range
	// Who is the policy's Who.
	Who string
}

// Error implements error.
func (e *EgressError) Error() string {
	who := e.Who
	if who == "" {
		who = "this request"
	}
	return fmt.Sprintf("%s may not connect to %s: it is %s (%s), refused to a tenant unless an operator allows the range (--tenant-egress-allow)",
		who, e.Addr, e.Range.Name, e.Range.Prefix)
}

// Check returns an *EgressError when the policy refuses addr, else nil. An IPv4
// address mapped into IPv6 is checked as the IPv4 address it is.
func (e Egress) Check(addr netip.Addr) error {
	addr = addr.Unmap().WithZone("")
	for _, a := range e.Allow {
		if a.Contains(addr) {
			return nil
		}
	}
	for _, r := range RefusedRanges {
		if r.Prefix.Contains(addr) {
			return &EgressError{Addr: addr, Range: r, Who: e.Who}
		}
	}
	return nil
}

// control refuses, before connect(2), a socket whose address the policy refuses: it
// checks the very address the dialer resolved the name to and is about to connect.
func (e Egress) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: cannot read the address %q: %w", address, err)
	}
	return e.Check(ap.Addr())
}

// Transport returns Transport() whose dialer checks every address against the policy
// before it connects (a name is resolved first, each address it resolves to checked
// as it is dialled), and which goes through no proxy (HTTP_PROXY would hide the
// address connected to).
func (e Egress) Transport() *http.Transport {
	t := Transport()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: e.control}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialAborting(ctx, d, network, addr)
	}
	t.Proxy = nil
	return t
}
