package reconcile

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
)

// sinceMargin widens LookupParams.Since below the first attempt's start, for clock
// differences between Postgres and the vendor.
const sinceMargin = 5 * time.Minute

// candidate is an op as the reconciler sees it.
type candidate struct {
	id, key, tool, vendor, vendorRef, token string
	// vendorAccount is the account the op was accepted under (outbox.Op.VendorAccount).
	vendorAccount                   string
	tenantID                        int64
	args                            json.RawMessage
	status                          protocol.Status
	attempts, generation            int
	staleKey                        bool
	createdAt                       time.Time
	dispatchStartedAt               *time.Time
	firstStarted                    *time.Time
	unfinishedStarted, lastFinished *time.Time
	// sealed says that the op's full args are sealed: its stored args are already
	// the redacted form.
	sealed bool
	// traceParent is the trace context the op was created under.
	traceParent string
}

func scanCandidate(row pgx.Row) (*candidate, error) {
	c := &candidate{}
	var status string
	err := row.Scan(&c.id, &c.tenantID, &c.key, &c.tool, &c.vendor, &c.args, &c.vendorRef, &status, &c.token,
		&c.attempts, &c.generation, &c.staleKey, &c.createdAt, &c.sealed, &c.dispatchStartedAt, &c.firstStarted,
		&c.unfinishedStarted, &c.lastFinished, &c.traceParent, &c.vendorAccount)
	if err != nil {
		return nil, err
	}
	c.status = protocol.Status(status)
	return c, nil
}

// since is the lower bound on the creation time of the op's objects.
func (c *candidate) since() time.Time {
	t := c.createdAt
	if c.firstStarted != nil {
		t = *c.firstStarted
	} else if c.dispatchStartedAt != nil {
		t = *c.dispatchStartedAt
	}
	return t.Add(-sinceMargin)
}

// lastSent is the latest moment the vendor may have created an object for the op: the
// end of its last finished attempt or, when a later or concurrent attempt never ended
// (its worker died mid-request), that attempt's start plus the job timeout, whichever
// is later.
func (c *candidate) lastSent(jobTimeout time.Duration) time.Time {
	switch {
	case c.unfinishedStarted != nil:
		t := c.unfinishedStarted.Add(jobTimeout)
		if c.lastFinished != nil && c.lastFinished.After(t) {
			t = *c.lastFinished
		}
		return t
	case c.lastFinished != nil:
		return *c.lastFinished
	case c.dispatchStartedAt != nil:
		return c.dispatchStartedAt.Add(jobTimeout)
	}
	return c.createdAt
}
