package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/vendorapi"
)

// The tools the workload uses, and the kinds of vendor object they create.
const (
	// toolMCP and toolMCPStdio are the fake MCP upstreams' write tool, as the catalog
	// offers it.
	toolMCP      = mcpUpstream + ".send_mail"
	toolMCPStdio = mcpStdioUpstream + ".send_mail"
	// toolGated is the HTTP upstream's gated tool (see gated.go).
	toolGated = mcpUpstream + ".wipe_mailbox"

	kindPaymentIntent = "stripe.payment_intent"
	kindRefund        = "stripe.refund"
	kindMessage       = "sendgrid.message"
	kindEffect        = "webhook.effect"
	kindMCPMail       = "mcp.mail"
	kindMCPStdioMail  = "mcpio.mail"
	kindMCPWipe       = "mcp.wipe"
)

// mcpUpstream is the name of the fake MCP upstream in the serve processes' tool
// catalog: its send_mail is a write tool whose ops are reconciled through its read tool
// find_mail, called with the op id that send_mail's ref argument carries.
const mcpUpstream = "mcp"

// mcpStdioUpstream is the stdio fake MCP upstream (devkit/fakemcp/cmd/fakemcp), which
// each serve process starts: the processes share its state file, which holds its mails
// and its crash knob.
const mcpStdioUpstream = "mcpio"

// conflictMarker marks a conflicting payload: in Stripe metadata["chaos"], in
// a mail's subject, in a webhook's path. oncebox must refuse it with 422, so no
// vendor object may ever carry it.
const conflictMarker = "conflict"

// webhookTarget is the name of the fake webhook target.
const webhookTarget = "chaos"

// blindTarget is a second webhook target on the same fake, under the path
// prefix blindPrefix, where the lookup path answers 404: oncebox cannot ask it
// what happened, so its unknown outcomes must go to needs_review, explained,
// with at most one effect each.
const (
	blindTarget = "blind"
	blindPrefix = "/blind"
)

// plainTarget is a webhook target served by a receiver that does not
// deduplicate Idempotency-Key (every POST is a delivery) but answers the lookup
// path, used when the run keeps oncebox's default webhook mode (native keys
// off): a lost answer may only be settled by a lookup after the lag.
const plainTarget = "plain"

// hangFor is how long a hanging fake holds a request: past every vendor
// timeout the serve processes use.
const hangFor = 4 * time.Second

// fakes are the three fake vendors, served on loopback ports in this process.
type fakes struct {
	stripe   *fakestripe.Server
	sendgrid *fakesendgrid.Server
	webhook  *fakewebhook.Server
	// plain is the receiver of plainTarget: no deduplication.
	plain *fakewebhook.Server
	// mcp is the MCP upstream, served over streamable HTTP; its mails are the side
	// effects of the toolMCP ops.
	mcp *fakemcp.Server
	// crm is the catalog's CRM target (crm.go): no deduplication.
	crm *fakewebhook.Server

	stripeURL, sendgridURL, webhookURL, plainURL, mcpURL, crmURL string

	// tls serves the fakes but the MCP upstream over TLS offering HTTP/2 (nil: plain
	// HTTP); late are the late-delivery faults in front of SendGrid, the webhook
	// receivers and the CRM (h2.go), lateCounts what they did.
	tls        *vendorTLS
	late       []*lateFault
	lateCounts lateCounts
	// secure says, per server of servers, whether it is served over tls; conns knows
	// which of their connections are closed.
	secure []bool
	conns  connTracker

	// faults counts the failures clients saw: 5xx, 429, 409, dropped
	// connections and answers slower than hangFor/2 (the MCP upstream counts its own).
	faults  atomic.Int64
	servers []*http.Server

	// The signing secrets of the events the fakes post (see setEvents).
	eventSecret string
	eventKey    *ecdsa.PrivateKey
	eventPubKey string
}

// startFakes serves the fakes with the given visibility lags, over vtls when it is not
// nil.
func startFakes(lag time.Duration, vtls *vendorTLS, seed int64) (*fakes, error) {
	f := &fakes{
		tls:      vtls,
		crm:      fakewebhook.New(fakewebhook.Config{LookupLag: lag, HangFor: hangFor}),
		stripe:   fakestripe.New(fakestripe.Config{SearchLag: lag, HangFor: hangFor}),
		sendgrid: fakesendgrid.New(fakesendgrid.Config{ActivityLag: lag, ActivityRatePerMinute: -1, HangFor: hangFor}),
		webhook:  fakewebhook.New(fakewebhook.Config{HonourKeys: true, LookupLag: lag, HangFor: hangFor, RefusePrefix: refusedPathPrefix}),
		plain:    fakewebhook.New(fakewebhook.Config{LookupLag: lag, HangFor: hangFor}),
		mcp:      fakemcp.New(),
	}
	f.mcp.SetHangFor(hangFor)
	var err error
	f.eventSecret = "whsec_chaos"
	if f.eventKey, f.eventPubKey, err = fakesendgrid.NewEventKey(); err != nil {
		return nil, fmt.Errorf("event signing key: %w", err)
	}
	late := func(h http.Handler, n int64) http.Handler {
		lf := newLateFault(h, &f.lateCounts, seed+n)
		f.late = append(f.late, lf)
		return lf
	}
	for _, s := range []struct {
		h      http.Handler
		url    *string
		secure bool
	}{{f.countFaults(f.stripe), &f.stripeURL, true}, {late(f.countFaults(f.sendgrid), 11), &f.sendgridURL, true},
		{late(f.countFaults(f.webhook), 12), &f.webhookURL, true}, {late(f.countFaults(f.plain), 13), &f.plainURL, true},
		{f.mcp.Handler(), &f.mcpURL, false}, {late(f.countFaults(f.crm), 14), &f.crmURL, true}} {
		url, err := f.serve(s.h, s.secure && vtls != nil)
		if err != nil {
			f.close()
			return nil, err
		}
		*s.url = url
	}
	return f, nil
}

// vendorURLs are the base URLs of the fakes, as one serve process reaches them.
type vendorURLs struct {
	stripe, sendgrid, webhook, plain, mcp, crm string
}

// urls are the fakes' URLs on loopback.
func (f *fakes) urls() vendorURLs {
	return vendorURLs{stripe: f.stripeURL, sendgrid: f.sendgridURL, webhook: f.webhookURL, plain: f.plainURL, mcp: f.mcpURL, crm: f.crmURL}
}

// listenAlso serves every fake on addr too (the host side of a network namespace's
// vendors link), on free ports, and returns their URLs there.
func (f *fakes) listenAlso(addr netip.Addr) (vendorURLs, error) {
	// f.servers holds the servers in the order startFakes started them.
	if len(f.servers) != 6 {
		return vendorURLs{}, fmt.Errorf("listen on %s: the fakes are not all serving", addr)
	}
	var urls [6]string
	for i, srv := range f.servers {
		l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), "0"))
		if err != nil {
			return vendorURLs{}, fmt.Errorf("listen for a fake vendor on %s: %w", addr, err)
		}
		urls[i] = f.serveOn(srv, l, f.secure[i])
	}
	return vendorURLs{stripe: urls[0], sendgrid: urls[1], webhook: urls[2], plain: urls[3], mcp: urls[4], crm: urls[5]}, nil
}

func (f *fakes) serve(h http.Handler, secure bool) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen for a fake vendor: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: f.conns.ConnContext, ConnState: f.conns.ConnState,
		ErrorLog: log.New(io.Discard, "", 0)}
	f.servers = append(f.servers, srv)
	f.secure = append(f.secure, secure)
	return f.serveOn(srv, l, secure), nil
}

// serveOn serves srv on l, over TLS when secure, and returns its URL.
func (f *fakes) serveOn(srv *http.Server, l net.Listener, secure bool) string {
	if !secure {
		go func() { _ = srv.Serve(l) }()
		return "http://" + l.Addr().String()
	}
	l = f.tls.listen(l)
	go func() { _ = srv.Serve(l) }()
	return "https://" + l.Addr().String()
}

// stripeAccounts returns the fake Stripe's platform and each connected account's
// fake: each holds its own objects and draws its own faults.
func (f *fakes) stripeAccounts() []*fakestripe.Server {
	out := []*fakestripe.Server{f.stripe}
	for _, id := range f.stripe.Accounts() {
		out = append(out, f.stripe.Account(id))
	}
	return out
}

// stripeAccount returns the fake of account (a Connect account id, or
// platformAccount).
func (f *fakes) stripeAccount(account string) *fakestripe.Server {
	if a := f.stripe.Account(account); a != nil {
		return a
	}
	return f.stripe
}

// setFaults turns random fault injection on (seeded) or off, in every Stripe
// account alike.
func (f *fakes) setFaults(on bool, seed int64) {
	if !on {
		for _, a := range f.stripeAccounts() {
			a.SetRandomFaults(nil, 0)
			a.ReleaseHangs()
		}
		f.sendgrid.SetRandomFaults(nil, 0)
		f.webhook.SetRandomFaults(nil, 0)
		f.plain.SetRandomFaults(nil, 0)
		f.mcp.SetRandomFaults(nil, 0)
		f.mcp.Release()
		f.webhook.ReleaseHangs()
		f.plain.ReleaseHangs()
		f.crm.SetRandomFaults(nil, 0)
		f.crm.ReleaseHangs()
		for _, lf := range f.late {
			lf.on.Store(false)
		}
		return
	}
	for _, lf := range f.late {
		lf.on.Store(f.tls != nil)
	}
	// The CRM drops a quarter of its answers after acting: on the blind target the op
	// goes to needs_review, for a person to resolve (crm.go).
	f.crm.SetRandomFaults(map[fakewebhook.FaultKind]float64{fakewebhook.FaultDropAfterEffect: 0.25}, seed+5)
	for i, a := range f.stripeAccounts() {
		a.SetRandomFaults(map[fakestripe.FaultKind]float64{
			fakestripe.FaultStored500:        0.02,
			fakestripe.Fault429:              0.03,
			fakestripe.Fault409:              0.01,
			fakestripe.FaultDropAfterCreate:  0.04,
			fakestripe.FaultHang:             0.03,
			fakestripe.FaultDropBeforeCreate: 0.02,
		}, seed+int64(i)<<32)
	}
	f.sendgrid.SetRandomFaults(map[fakesendgrid.FaultKind]float64{
		fakesendgrid.FaultAcceptThenDrop:   0.04,
		fakesendgrid.FaultHang:             0.03,
		fakesendgrid.Fault429:              0.03,
		fakesendgrid.Fault500Stored:        0.02,
		fakesendgrid.Fault500NotStored:     0.02,
		fakesendgrid.FaultDropBeforeAccept: 0.02,
	}, seed+1)
	webhookFaults := map[fakewebhook.FaultKind]float64{
		fakewebhook.FaultDropAfterEffect:  0.04,
		fakewebhook.FaultHangAfterEffect:  0.03,
		fakewebhook.Fault500Stored:        0.02,
		fakewebhook.Fault500AfterEffect:   0.02,
		fakewebhook.Fault429:              0.03,
		fakewebhook.Fault409:              0.01,
		fakewebhook.FaultDropBeforeEffect: 0.02,
	}
	f.webhook.SetRandomFaults(webhookFaults, seed+2)
	f.plain.SetRandomFaults(webhookFaults, seed+3)
	f.mcp.SetRandomFaults(map[fakemcp.FaultKind]float64{
		fakemcp.FaultDropAfterActing: 0.04,
		fakemcp.FaultHangAfterActing: 0.03,
		fakemcp.FaultIsError:         0.03,
	}, seed+4)
}

// eventFaults are the delivery faults of the fakes' events: late (up to 1.5 s),
// redelivered, out of order, and retried while the serve process is down (the next
// one is tried).
func eventFaults(url string, fallbacks []string, seed int64) fakestripe.EventDelivery {
	return fakestripe.EventDelivery{URL: url, Fallbacks: fallbacks, Delay: 100 * time.Millisecond, Jitter: 1500 * time.Millisecond,
		DuplicateRate: 0.1, ReorderRate: 0.3, RetryFor: 3 * time.Minute, Seed: uint64(seed)}
}

// setEvents makes the fakes post signed events to the serve processes' endpoints.
func (f *fakes) setEvents(addrs []string, seed int64) error {
	urls := func(path string) []string {
		out := make([]string, len(addrs))
		for i, a := range addrs {
			out[i] = "http://" + a + path
		}
		return out
	}
	st, sg := urls("/v1/vendor-events/stripe"), urls("/v1/vendor-events/sendgrid")
	if err := f.stripe.SetEvents(&fakestripe.EventsConfig{Config: eventFaults(st[0], st[1:], seed), Secret: f.eventSecret}); err != nil {
		return err
	}
	return f.sendgrid.SetEvents(&fakesendgrid.EventsConfig{Config: fakesendgrid.EventDelivery(eventFaults(sg[0], sg[1:], seed+1)), Key: f.eventKey})
}

// forbidActivity makes SendGrid's Email Activity API answer 403 (no add-on) for d.
func (f *fakes) forbidActivity(d time.Duration) {
	f.sendgrid.SetActivityForbidden(true)
	time.AfterFunc(d, func() { f.sendgrid.SetActivityForbidden(false) })
}

// eventStats sums what the fakes' event posters did: delivered and given up.
func (f *fakes) eventStats() (delivered, dropped int) {
	for _, a := range f.stripeAccounts() {
		_, d, x := a.EventStats()
		delivered, dropped = delivered+d, dropped+x
	}
	_, d, x := f.sendgrid.EventStats()
	return delivered + d, dropped + x
}

// objects returns every object the fakes hold, from their own records: Stripe's
// from the platform and every connected account.
func (f *fakes) objects() []VendorObject {
	var out []VendorObject
	for _, a := range f.stripeAccounts() {
		out = append(out, stripeObjects(a)...)
	}
	seen := map[string]bool{}
	for _, m := range f.sendgrid.Messages() {
		if seen[m.XMessageID] {
			continue
		}
		seen[m.XMessageID] = true
		out = append(out, VendorObject{
			Kind: kindMessage, ID: m.XMessageID, OpID: m.CustomArgs[vendorapi.TagKey], Effect: true,
			Conflict: strings.Contains(m.Subject, conflictMarker),
			Detail:   fmt.Sprintf("(accepted %s)", m.AcceptedAt.Format(time.StampMilli)),
		})
	}
	for _, w := range []struct {
		name string
		srv  *fakewebhook.Server
	}{{webhookTarget, f.webhook}, {plainTarget, f.plain}} {
		for _, e := range w.srv.Effects() {
			out = append(out, VendorObject{
				Kind: kindEffect, ID: e.ID, OpID: e.OpID, Effect: true,
				Conflict: strings.Contains(e.Path, conflictMarker),
				Detail:   fmt.Sprintf("(receiver %s, path %s, at %s)", w.name, e.Path, e.At.Format(time.StampMilli)),
			})
		}
	}
	for _, m := range f.mcp.Mails() {
		out = append(out, VendorObject{
			Kind: kindMCPMail, ID: m.ID, OpID: m.Ref, Effect: true,
			Conflict: strings.Contains(m.Subject, conflictMarker),
			Detail:   fmt.Sprintf("(upstream %s, _meta op %v, to %s)", mcpUpstream, m.Meta[fakemcp.MetaOpID], m.To),
		})
	}
	for _, w := range f.mcp.Wipes() {
		out = append(out, VendorObject{
			Kind: kindMCPWipe, ID: w.ID, OpID: w.Ref, Effect: true,
			Conflict: strings.Contains(w.Reason, conflictMarker),
			Detail:   fmt.Sprintf("(upstream %s, _meta op %s, mailbox %s)", mcpUpstream, w.OpID, w.Mailbox),
		})
	}
	return out
}

// stripeObjects returns the objects one Stripe account holds, each naming it.
func stripeObjects(a *fakestripe.Server) []VendorObject {
	account := cmp.Or(a.AccountID(), platformAccount)
	var out []VendorObject
	for _, pi := range a.PaymentIntents() {
		out = append(out, VendorObject{
			Kind: kindPaymentIntent, ID: pi.ID, OpID: pi.Metadata[vendorapi.TagKey], Account: account,
			Effect:   pi.Status == "succeeded",
			Conflict: pi.Metadata["chaos"] == conflictMarker,
			Amount:   &pi.Amount,
			Detail:   fmt.Sprintf("(%s, status %s, amount %d)", account, pi.Status, pi.Amount),
		})
	}
	for _, re := range a.Refunds() {
		out = append(out, VendorObject{
			Kind: kindRefund, ID: re.ID, OpID: re.Metadata[vendorapi.TagKey], Account: account, Effect: true,
			Conflict: re.Metadata["chaos"] == conflictMarker,
			Amount:   &re.Amount,
			Detail:   fmt.Sprintf("(%s, of %s, amount %d)", account, re.PaymentIntent, re.Amount),
		})
	}
	return out
}

// refused returns the ops the fake MCP upstream answered isError, by the op id in the
// call's _meta: their failure is the upstream's, planned by its faults.
func (f *fakes) refused() map[string]bool {
	out := map[string]bool{}
	for _, r := range f.mcp.Refusals() {
		if r.OpID != "" {
			out[r.OpID] = true
		}
	}
	return out
}

// close stops the fake servers and their events.
func (f *fakes) close() {
	f.setFaults(false, 0)
	_ = f.stripe.SetEvents(nil)
	_ = f.sendgrid.SetEvents(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range f.servers {
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	}
}

// countFaults counts the failures h answers with.
func (f *fakes) countFaults(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		cw := &countingWriter{ResponseWriter: w}
		defer func() {
			if cw.hijacked || cw.status >= 500 || cw.status == http.StatusTooManyRequests ||
				cw.status == http.StatusConflict || time.Since(start) > hangFor/2 {
				f.faults.Add(1)
			}
		}()
		h.ServeHTTP(cw, r)
	})
}

// countingWriter remembers the status written and whether the connection was
// taken over (to be dropped).
type countingWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *countingWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *countingWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (w *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	w.hijacked = true
	return hj.Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
