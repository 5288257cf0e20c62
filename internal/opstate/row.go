package opstate

import (
	"crypto/sha256"
	"encoding/json"
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// NothingSentField is the member of an op's stored error (its error column) that is
// true when none of the op's requests can have been carried out by the vendor.
const NothingSentField = "nothing_sent"

// Row is an op's row as OpColumns selects it: the one scan of the op's columns, for
// every package that reads an op (outbox's Op, dispatch's run). A query may select more
// columns after OpColumns and scan them after Dest's.
type Row struct {
	ID                string
	TenantID          int64
	Key               string
	Tool              string
	Vendor            string
	Args              json.RawMessage
	Fingerprint       [sha256.Size]byte
	Status            protocol.Status
	Attempts          int
	Generation        int
	VendorKey         string
	VendorRef         string
	Result            json.RawMessage
	Error             json.RawMessage
	ConversationID    string
	ToolCallID        string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	ExpiresAt         time.Time
	DispatchStartedAt *time.Time
	TraceParent       string
	VendorAccount     string

	// fp and status hold the columns scanned in another type until Finish.
	fp     []byte
	status string
}

// Dest is where the columns of OpColumns are scanned to, in their order. Call Finish
// after the scan.
func (r *Row) Dest() []any {
	return []any{&r.ID, &r.TenantID, &r.Key, &r.Tool, &r.Vendor, &r.Args, &r.fp, &r.status,
		&r.Attempts, &r.Generation, &r.VendorKey, &r.VendorRef, &r.Result, &r.Error,
		&r.ConversationID, &r.ToolCallID, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &r.DispatchStartedAt, &r.TraceParent,
		&r.VendorAccount}
}

// Finish completes a scan into Dest.
func (r *Row) Finish() {
	copy(r.Fingerprint[:], r.fp)
	r.Status = protocol.Status(r.status)
	r.fp, r.status = nil, ""
}
