package catalog

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// Confinement is what a tenant's own catalog may reach (LoadTenant). The
// installation's catalog (Load, Parse) is not confined: operators deploy it.
type Confinement struct {
	// Tenants are the names of every tenant: a tenant's file reads only the variables
	// of its own namespace (Namespace), never one of another tenant's.
	Tenants []string
	// Commands are the programs, as absolute paths, a tenant's stdio upstream
	// (command:) may run. Defaults to none: a tenant's file starts no program.
	Commands []string
	// EgressAllow are the address ranges a tenant's targets and upstreams may reach
	// although the egress policy refuses them (vendorhttp.RefusedRanges: loopback,
	// link-local, private, unspecified, multicast). Defaults to none.
	EgressAllow []netip.Prefix
}

// Namespace is the prefix of the environment variables a tenant's own catalog may
// read (secret_env, ${VAR} in an upstream's headers and env): ONCEBOX_TENANT_, the
// tenant's name in upper case with every character but A-Z and 0-9 as "_", then "_"
// (tenant acme-eu: ONCEBOX_TENANT_ACME_EU_).
func Namespace(tenant string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, tenant)
	return "ONCEBOX_TENANT_" + name + "_"
}

// envFunc reads a variable a catalog names: its value, or why the file may not read
// it ("" when it may).
type envFunc func(name string) (value, refused string)

// openEnv reads any variable: the installation's catalog.
func openEnv(getenv func(string) string) envFunc {
	return func(name string) (string, string) { return getenv(name), "" }
}

// env reads, for tenant's file, only the variables of its own namespace and of no
// other tenant's: another tenant whose namespace is as long or longer and holds the
// variable (acme_eu's ONCEBOX_TENANT_ACME_EU_ within acme's ONCEBOX_TENANT_ACME_) owns it.
func (conf Confinement) env(tenant string, getenv func(string) string) envFunc {
	own := Namespace(tenant)
	return func(name string) (string, string) {
		prefix := fmt.Sprintf("tenant %s's catalog may not read the environment variable %s: ", tenant, name)
		if !strings.HasPrefix(name, own) {
			return "", prefix + "a tenant's file reads only its own variables, " + own + "* (the installation's, such as ONCEBOX_*, STRIPE_*, SENDGRID_* and DATABASE_URL, are not its)"
		}
		for _, other := range conf.Tenants {
			ns := Namespace(other)
			if other == tenant || !strings.HasPrefix(name, ns) || len(ns) < len(own) {
				continue
			}
			if ns == own {
				return "", prefix + fmt.Sprintf("tenants %s and %s have the same namespace %s*: rename one of them", tenant, other, own)
			}
			return "", prefix + fmt.Sprintf("it is in tenant %s's namespace, %s*", other, ns)
		}
		return getenv(name), ""
	}
}

// LoadTenant reads and checks tenant's own catalog at path as Load does, confined to
// the tenant: it may read only the environment variables of its namespace, run only
// the programs conf.Commands allows (checked here, before anything is started), and
// reach no refused address (literal ones are refused here; what a name resolves to
// is checked again at each connection). getenv is os.Getenv when nil.
func LoadTenant(path, tenant string, conf Confinement, getenv func(string) string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Message: fmt.Sprintf("cannot read the tool catalog: %v", err)}
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	c, err := parse(path, data, conf.env(tenant, getenv))
	if err != nil {
		return nil, err
	}
	if err := conf.confine(c, tenant); err != nil {
		return nil, err
	}
	return c, nil
}

// confine checks c's upstream programs and literal addresses against conf, and gives
// each target and upstream its egress policy.
func (conf Confinement) confine(c *Catalog, tenant string) error {
	for _, name := range sortedKeys(c.Targets) {
		t := c.Targets[name]
		t.egress = &vendorhttp.Egress{Allow: conf.EgressAllow, Who: fmt.Sprintf("tenant %s's target %s", tenant, name)}
		if err := checkLiteral(t.BaseURL, t.egress); err != nil {
			return &Error{File: c.File, Kind: "target", Name: name, Field: "base_url", Message: err.Error()}
		}
	}
	for _, name := range c.UpstreamNames() {
		u := c.Upstreams[name]
		if u.Command != "" {
			if !slices.Contains(conf.Commands, u.Command) {
				return &Error{File: c.File, Kind: "upstream", Name: name, Field: "command",
					Message: fmt.Sprintf("tenant %s's catalog may not run %s on the host: a tenant's stdio upstream runs only a program an operator allows (--tenant-upstream-commands)", tenant, u.Command)}
			}
			continue
		}
		u.egress = &vendorhttp.Egress{Allow: conf.EgressAllow, Who: fmt.Sprintf("tenant %s's upstream %s", tenant, name)}
		if err := checkLiteral(u.URL, u.egress); err != nil {
			return &Error{File: c.File, Kind: "upstream", Name: name, Field: "url", Message: err.Error()}
		}
	}
	return nil
}

// checkLiteral refuses a URL whose host is an address the policy refuses.
func checkLiteral(raw string, e *vendorhttp.Egress) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // refused by the file's own checks
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil // a name: checked at each connection
	}
	return e.Check(addr)
}

// egressClient is the HTTP client of a confined target: the webhook adapter's default
// (timeout, no redirect followed, no kept-alive connection) over the policy's
// transport.
func egressClient(e *vendorhttp.Egress, opts Options) *http.Client {
	t := e.Transport()
	t.DisableKeepAlives = true
	return &http.Client{Timeout: opts.Timeout, Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
