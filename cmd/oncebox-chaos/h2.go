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
// internal/testkit/latevendor proves both behaviours against real sockets. lateDelay is
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
		certFile: dir + "/vendors.pem"}
	if err := os.WriteFile(v.certFile, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write the vendors' certificate: %w", err)
	}
	return v, nil
}

// listen wraps l: its connections remember when their client went away, and, with TLS,
// are served over TLS offering h2.
func (v *vendorTLS) listen(l net.Listener) net.Listener {
	l = &trackListener{Listener: l}
	if v == nil {
		return l
	}
	return tls.NewListener(l, v.cfg)
}

// trackListener hands out trackConns.
type trackListener struct{ net.Listener }

func (l *trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackConn{Conn: c}, nil
}

// trackConn records that a read failed: the client closed or reset the connection.
type trackConn struct {
	net.Conn
	gone atomic.Bool
}

func (c *trackConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.gone.Store(true)
	}
	return n, err
}

type connKey struct{}

// connContext puts the request's trackConn in its context (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if t, ok := c.(*trackConn); ok {
		return context.WithValue(ctx, connKey{}, t)
	}
	return ctx
}

// lateFault is the late-delivery fault in front of one fake.
type lateFault struct {
	next http.Handler
	on   atomic.Bool
	// counts is shared by the fakes: late deliveries and drops.
	counts *lateCounts
	mu     sync.Mutex
	rng    *rand.Rand
}

// lateCounts counts what the late-delivery faults did.
type lateCounts struct {
	held, delivered, dropped atomic.Int64
}

func newLateFault(next http.Handler, counts *lateCounts, seed int64) *lateFault {
	return &lateFault{next: next, counts: counts, rng: rand.New(rand.NewPCG(uint64(seed), 0x1a7e))}
}

func (f *lateFault) draw() bool {
	if !f.on.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < lateRate
}

func (f *lateFault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !f.draw() {
		f.next.ServeHTTP(w, r)
		return
	}
	conn, _ := r.Context().Value(connKey{}).(*trackConn)
	body, err := io.ReadAll(r.Body)
	if err != nil || conn == nil {
		return
	}
	f.counts.held.Add(1)
	select {
	case <-r.Context().Done(): // the client gave up: its stream reset, or its connection closed
	case <-time.After(hangFor):
		f.next.ServeHTTP(w, cloneRequest(r, body, r.Context()))
		return
	}
	time.Sleep(100 * time.Millisecond) // the connection's close is read
	if conn.gone.Load() {
		f.counts.dropped.Add(1)
		return
	}
	f.counts.delivered.Add(1)
	go func() {
		// A fault the fake draws for the late copy (a dropped connection) aborts it.
		defer func() { _ = recover() }()
		time.Sleep(lateDelay)
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
