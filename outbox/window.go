package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// KeyInWindow returns the idempotency key that calls identified by call share while a
// window is open for them: the key that opened the window, or fresh when none is open
// (a window of length window then opens now, under fresh). Concurrent callers with the
// same call get the same key, whichever process they run in. It serves callers that
// have no key of their own and want identical calls within a time window to be one op
// (MCP calls that name no conversation).
//
// Keep window below the tool's TTL: an op purged while its window is still open
// would let the same key record a new op.
func (ob *Outbox) KeyInWindow(ctx context.Context, tenantID int64, call, fresh string, window time.Duration) (string, error) {
	if tenantID == 0 || call == "" || window <= 0 {
		return "", errors.New("outbox: KeyInWindow needs a tenant, a call and a positive window")
	}
	if _, err := protocol.NormalizeKey(fresh); err != nil {
		return "", err
	}
	var key string
	if err := ob.pool.QueryRow(ctx, sqlKeyInWindow, tenantID, call, fresh, window.Seconds()).Scan(&key); err != nil {
		return "", fmt.Errorf("outbox: key window: %w", err)
	}
	return key, nil
}
