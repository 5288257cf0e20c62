package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/vendorapi"
)

// registerNotify builds the Outbox's notifier (package notify) and adds its worker when
// notifications are configured (Config.Notify).
func (ob *Outbox) registerNotify(c *Config, workers *river.Workers) error {
	if c.Notify == nil {
		return nil
	}
	n, err := notify.New(*c.Notify, notify.Deps{Logger: c.Logger})
	if err != nil {
		return fmt.Errorf("outbox: Notify: %w", err)
	}
	ob.notifier = n
	return n.Register(workers)
}

// notifyTx inserts the notification job of an op that starts waiting, in its
// transaction.
func (ob *Outbox) notifyTx(ctx context.Context, tx pgx.Tx, op *Op, tool vendorapi.Tool, args json.RawMessage, why string) error {
	if ob.notifier == nil {
		return nil
	}
	n := notify.Args{OpID: op.ID, TenantID: op.TenantID, Key: op.Key, Tool: op.Tool, Why: why,
		ConversationID: op.ConversationID, RequestedAt: op.CreatedAt.UTC()}
	if tool.Amount != nil {
		if amount, currency, ok := tool.Amount(args); ok {
			n.Amount, n.Currency = &amount, currency
		}
	}
	p, err := paymentOf(ctx, tx, ob.cfg.Tools, op.TenantID, tool, args)
	if err != nil {
		return err
	}
	if p != nil {
		n.Payment = (*notify.Payment)(p)
		if n.Currency == "" {
			n.Currency = p.Currency
		}
	}
	if err := ob.notifier.InsertTx(ctx, tx, ob.river, n); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}
