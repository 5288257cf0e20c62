package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oncebox/oncebox/vendorapi"
)

// DefaultAdmissionReadTimeout is Config.AdmissionReadTimeout's default.
const DefaultAdmissionReadTimeout = 5 * time.Second

// maxAdmissionReads bounds the vendor reads one enqueue makes before its transaction:
// each pass through admission asks for one read not made yet, and a call names few
// objects (Tool.Objects) and has one price (Tool.Price).
const maxAdmissionReads = 16

// ErrAdmissionReadDeferred is matched by the error a vendor read returns when it is
// asked for inside a transaction oncebox owns (Tool.Price, ObjectArg.Tag during
// Enqueue and EnqueuePrepared): the read is not made there, in a transaction that
// holds row locks and, under group commit, other calls. A Gate that calls Tool.Price
// returns such an error as it is (the op's admission is then refused, nothing is
// recorded), and the enqueue makes the read with no transaction open, then takes the
// call through admission again with the vendor's answer.
var ErrAdmissionReadDeferred = errors.New("outbox: a vendor read is made before the enqueue's transaction")

// readNeeded is the error of an admission that needs a vendor read not made yet.
type readNeeded struct {
	key string
	// ctx carries what the read needs from the admission's context (the op's account).
	ctx  context.Context
	read func(context.Context) (any, error)
}

func (e *readNeeded) Error() string {
	return ErrAdmissionReadDeferred.Error() + ": " + e.key
}

// Is makes errors.Is(err, ErrAdmissionReadDeferred) true.
func (e *readNeeded) Is(target error) bool { return target == ErrAdmissionReadDeferred }

// admissionReads holds the vendor reads an enqueue in a transaction of oncebox's own
// made before that transaction, by key: the answers admission uses instead of asking
// the vendor inside it.
type admissionReads struct {
	mu   sync.Mutex
	done map[string]readAnswer
}

type readAnswer struct {
	v   any
	err error
}

type admissionReadsKey struct{}

// withAdmissionReads returns ctx carrying reads: admission, under it, makes no vendor
// read but answers from reads or with a *readNeeded.
func withAdmissionReads(ctx context.Context, reads *admissionReads) context.Context {
	return context.WithValue(ctx, admissionReadsKey{}, reads)
}

// fetch makes the read need names, with no transaction open, bounded by timeout and by
// the caller's ctx, and keeps its answer.
func (r *admissionReads) fetch(ctx context.Context, need *readNeeded, timeout time.Duration) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(need.ctx), timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	v, err := need.read(rctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		r.done = map[string]readAnswer{}
	}
	r.done[need.key] = readAnswer{v: v, err: err}
}

func (r *admissionReads) get(key string) (readAnswer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.done[key]
	return a, ok
}

func (r *admissionReads) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done)
}

// admissionRead is a vendor read admission needs, under key (the account ctx carries
// is part of it). In a transaction oncebox owns (ctx carries admissionReads) it answers
// from the reads made before the transaction, or with a *readNeeded; in the caller's
// transaction (EnqueueTx) it reads now, bounded by timeout.
func admissionRead[T any](ctx context.Context, timeout time.Duration, key string, read func(context.Context) (T, error)) (T, error) {
	key = vendorapi.AccountFrom(ctx).Ref + "\x00" + key
	reads, _ := ctx.Value(admissionReadsKey{}).(*admissionReads)
	if reads == nil {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return read(ctx)
	}
	var zero T
	if a, ok := reads.get(key); ok {
		v, _ := a.v.(T)
		return v, a.err
	}
	return zero, &readNeeded{key: key, ctx: ctx, read: func(ctx context.Context) (any, error) { return read(ctx) }}
}

// enqueueReadingFirst runs enqueue (an enqueue in a transaction of oncebox's own) with
// no vendor read inside its transaction: when admission needs one, enqueue's call is
// refused with nothing recorded, the read is made with no transaction open, and the
// call runs again, answered from it (docs/architecture.md, "Vendor reads at admission").
func (ob *Outbox) enqueueReadingFirst(ctx context.Context, enqueue func(context.Context) (*EnqueueResult, error)) (*EnqueueResult, error) {
	reads := &admissionReads{}
	ctx = withAdmissionReads(ctx, reads)
	for {
		res, err := enqueue(ctx)
		var need *readNeeded
		if !errors.As(err, &need) {
			return res, err
		}
		if reads.len() >= maxAdmissionReads {
			return nil, fmt.Errorf("outbox: admission asked for more than %d vendor reads", maxAdmissionReads)
		}
		reads.fetch(ctx, need, ob.cfg.AdmissionReadTimeout)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// objectTag is o.Tag(ctx, id) as admission makes it (admissionRead).
func (ob *Outbox) objectTag(ctx context.Context, o vendorapi.ObjectArg, id string) (string, error) {
	return admissionRead(ctx, ob.cfg.AdmissionReadTimeout, "tag\x00"+o.Arg+"\x00"+id, func(ctx context.Context) (string, error) {
		return o.Tag(ctx, id)
	})
}

// priced is a Tool.Price answer.
type priced struct {
	amount   int64
	currency string
}

// gateTool is the tool as the gate sees it: its Price made as admission makes vendor
// reads (admissionRead).
func (ob *Outbox) gateTool(t vendorapi.Tool) vendorapi.Tool {
	price := t.Price
	if price == nil {
		return t
	}
	timeout := ob.cfg.AdmissionReadTimeout
	t.Price = func(ctx context.Context, a json.RawMessage) (int64, string, error) {
		p, err := admissionRead(ctx, timeout, "price\x00"+string(a), func(ctx context.Context) (priced, error) {
			amount, currency, err := price(ctx, a)
			return priced{amount, currency}, err
		})
		return p.amount, p.currency, err
	}
	return t
}
