package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Vendors over HTTP/2 (Config.HTTP2, on by default): the fake Stripe, SendGrid, webhook
// receivers and CRM are served over TLS offering h2 and http/1.1, the serve processes
// trusting the run's certificate (SSL_CERT_FILE). Stripe is reached over HTTP/2 (its
// keys make a late copy harmless); SendGrid, the webhooks and the catalog's targets over
// HTTP/1.1 (vendorhttp.HTTP1Transport). The late-delivery fault holds a share of their
// POSTs unanswered until the client gives up, as a stalled network holds the bytes; then,
// as the network does once it heals, it delivers the request lateDelay later if the
// client's connection is still open (over HTTP/2 a cancel resets the stream only), and
// drops it if the client closed (aborted) the connection, as HTTP/1.1 does on a cancel:
// testkit/latevendor proves both behaviours against real sockets. lateDelay is
// past the lookup lag, so the reconciler has found nothing and resent: over HTTP/2, a
// vendor without keys acts twice.

// lateRate is the share of the POSTs held and delivered late (or dropped); lateDelay how
// long after the client gave up a held request is delivered.
const (
	lateRate  = 0.03
	lateDelay = 6 * time.Second
)

// vendorTLS is the run's certificate for the fakes, and the file the serve processes
// trust.
type vendorTLS struct {
	cfg      *tls.Config
	certFile string
	// roots trusts the certificate, for the harness's own tests.
	roots *x509.CertPool
}

// newVendorTLS makes a self-signed certificate for ips, written to dir/vendors.pem.
func newVendorTLS(dir string, ips []netip.Addr) (*vendorTLS, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		return nil, fmt.Errorf("vendor TLS key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oncebox-chaos fake vendors"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		DNSNames: []string{"localhost"},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	der, err := x509.CreateCertificate(cryptorand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("vendor TLS certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("vendor TLS key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, fmt.Errorf("vendor TLS key pair: %w", err)
	}
	v := &vendorTLS{cfg: &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}},
		certFile: dir + "/vendors.pem", roots: x509.NewCertPool()}
	v.roots.AppendCertsFromPEM(certPEM)
	if err := os.WriteFile(v.certFile, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write the vendors' certificate: %w", err)
	}
	return v, nil
}

// listen serves l over TLS offering h2, or as it is when v is nil.
func (v *vendorTLS) listen(l net.Listener) net.Listener {
	if v == nil {
		return l
	}
	return tls.NewListener(l, v.cfg)
}

// connTracker knows which of a server's connections are closed: its ConnContext
// puts a flag in each request's context, its ConnState raises it when the connection
// closes. An HTTP/2 connection closes on its own; an HTTP/1.1 one only once its handler
// returns, but over HTTP/1.1 a client can give up on a request only by closing the
// connection.
type connTracker struct{ conns sync.Map }

type connKey struct{}

// ConnContext is http.Server.ConnContext.
func (t *connTracker) ConnContext(ctx context.Context, c net.Conn) context.Context {
	closed := new(atomic.Bool)
	t.conns.Store(c, closed)
	return context.WithValue(ctx, connKey{}, closed)
}

// ConnState is http.Server.ConnState.
func (t *connTracker) ConnState(c net.Conn, s http.ConnState) {
	if s != http.StateClosed && s != http.StateHijacked {
		return
	}
	if v, ok := t.conns.LoadAndDelete(c); ok {
		v.(*atomic.Bool).Store(true)
	}
}

// connClosed reports whether the connection of r, whose client gave up on it, is
// closed.
func connClosed(r *http.Request) bool {
	if r.ProtoMajor == 1 {
		return true
	}
	closed, _ := r.Context().Value(connKey{}).(*atomic.Bool)
	return closed == nil || closed.Load()
}

// lateFault is the late-delivery fault in front of one fake.
type lateFault struct {
	next http.Handler
	on   atomic.Bool
	// counts is shared by the fakes: late deliveries and drops.
	counts *lateCounts
	// rate is the share of POSTs held (lateRate), delay how long after the client gave
	// up one is delivered (lateDelay).
	rate  float64
	delay time.Duration
	mu    sync.Mutex
	rng   *rand.Rand
}

// lateCounts counts what the late-delivery faults did.
type lateCounts struct {
	held, delivered, dropped atomic.Int64
}

func newLateFault(next http.Handler, counts *lateCounts, seed int64) *lateFault {
	return &lateFault{next: next, counts: counts, rate: lateRate, delay: lateDelay, rng: rand.New(rand.NewPCG(uint64(seed), 0x1a7e))}
}

func (f *lateFault) draw() bool {
	if !f.on.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < f.rate
}

func (f *lateFault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !f.draw() {
		f.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.counts.held.Add(1)
	select {
	case <-r.Context().Done(): // the client gave up: its stream reset, or its connection closed
	case <-time.After(hangFor):
		f.next.ServeHTTP(w, cloneRequest(r, body, r.Context()))
		return
	}
	// An HTTP/2 client may close the connection too: give it time to.
	for range 10 {
		if connClosed(r) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Whatever happens to the request, this handler must not answer it: returning
	// would make net/http send an empty 200, and a client whose cancel races the
	// read of that answer (Go's transport returns a response that arrives after it
	// cancelled) would take an effect that never happened for a success.
	defer panic(http.ErrAbortHandler)
	if connClosed(r) {
		f.counts.dropped.Add(1)
		return
	}
	f.counts.delivered.Add(1)
	go func() {
		// A fault the fake draws for the late copy (a dropped connection) aborts it.
		defer func() { _ = recover() }()
		time.Sleep(f.delay)
		f.next.ServeHTTP(discardWriter{h: http.Header{}}, cloneRequest(r, body, context.WithoutCancel(r.Context())))
	}()
}

// cloneRequest is r with body and ctx.
func cloneRequest(r *http.Request, body []byte, ctx context.Context) *http.Request {
	c := r.Clone(ctx)
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	return c
}

// discardWriter is the writer of a late request: nobody hears its answer.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
