// Package eventpost lets the fake vendors POST signed events to a URL as the real
// vendors do, with the faults real deliveries have: a delay, redeliveries of the same
// event, batches out of order, and retries while the receiver is down.
package eventpost

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Config says where and how a Poster delivers events.
type Config struct {
	// URL receives every batch as a POST. Required.
	URL string
	// Fallbacks are tried in turn, after URL, when a delivery fails (another process
	// behind the same endpoint). Optional.
	Fallbacks []string
	// Delay is how long after the side effect a delivery starts; Jitter adds a random
	// extra delay up to itself to each batch. Both default to 0.
	Delay, Jitter time.Duration
	// DuplicateRate is the chance that a batch is delivered a second time (a vendor's
	// redelivery), 0 to 1. Defaults to 0.
	DuplicateRate float64
	// ReorderRate is the chance that an object's batches are delivered last first,
	// 0 to 1. Defaults to 0.
	ReorderRate float64
	// RetryFor is how long a batch the receiver did not accept (no 2xx) is retried,
	// as vendors retry (Stripe: 3 days; SendGrid: 24 hours). Defaults to 1 minute.
	RetryFor time.Duration
	// Client makes the requests. Defaults to a client with a 10 s timeout.
	Client *http.Client
	// Seed seeds the random faults; 0 picks one.
	Seed uint64
}

// Batch builds one signed request; it is called again for each retry and
// redelivery, so that the signature's timestamp is fresh.
type Batch func(now time.Time) (body []byte, header http.Header)

// Poster delivers batches in the background. It is safe for concurrent use.
type Poster struct {
	cfg Config

	mu        sync.Mutex
	rng       *rand.Rand
	pending   int
	delivered int
	dropped   int
	stop      chan struct{}
	stopOnce  sync.Once
	wg        sync.WaitGroup
}

// New returns a Poster.
func New(cfg Config) *Poster {
	if cfg.RetryFor == 0 {
		cfg.RetryFor = time.Minute
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Poster{cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), stop: make(chan struct{})}
}

// Post delivers the batches about one object, in order unless Config.ReorderRate
// says otherwise.
func (p *Poster) Post(batches ...Batch) {
	p.mu.Lock()
	if p.cfg.ReorderRate > 0 && p.rng.Float64() < p.cfg.ReorderRate {
		for i, j := 0, len(batches)-1; i < j; i, j = i+1, j-1 {
			batches[i], batches[j] = batches[j], batches[i]
		}
	}
	delays := make([]time.Duration, len(batches))
	dups := make([]bool, len(batches))
	for i := range batches {
		delays[i] = p.cfg.Delay
		if p.cfg.Jitter > 0 {
			delays[i] += time.Duration(p.rng.Int64N(int64(p.cfg.Jitter)))
		}
		dups[i] = p.cfg.DuplicateRate > 0 && p.rng.Float64() < p.cfg.DuplicateRate
	}
	p.pending += len(batches)
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i, b := range batches {
			if !p.sleep(delays[i]) {
				p.finish(false)
				continue
			}
			ok := p.deliver(b)
			if ok && dups[i] {
				p.deliver(b)
			}
			p.finish(ok)
		}
	}()
}

func (p *Poster) finish(ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending--
	if ok {
		p.delivered++
	} else {
		p.dropped++
	}
}

// deliver sends one batch until the receiver accepts it or RetryFor is over.
func (p *Poster) deliver(b Batch) bool {
	deadline := time.Now().Add(p.cfg.RetryFor)
	wait := 100 * time.Millisecond
	urls := append([]string{p.cfg.URL}, p.cfg.Fallbacks...)
	for attempt := 0; ; attempt++ {
		body, h := b(time.Now())
		url := urls[attempt%len(urls)]
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
		if err == nil {
			for k, v := range h {
				req.Header[k] = v
			}
			resp, err := p.cfg.Client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					return true
				}
			}
		}
		if time.Now().Add(wait).After(deadline) || !p.sleep(wait) {
			return false
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (p *Poster) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stop:
		return false
	}
}

// Stats returns how many batches wait for delivery, were delivered (accepted once at
// least), and were given up.
func (p *Poster) Stats() (pending, delivered, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending, p.delivered, p.dropped
}

// Close stops waiting deliveries (they count as dropped) and waits for the ones in
// flight.
func (p *Poster) Close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
}
