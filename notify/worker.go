package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/internal/money"
)

// worker delivers approval notifications.
type worker struct {
	river.WorkerDefaults[Args]
	n *Notifier
}

// Timeout bounds one delivery.
func (w *worker) Timeout(*river.Job[Args]) time.Duration {
	return w.n.cfg.Timeout + time.Second
}

// Work POSTs the notification; any answer but 2xx, or none, is retried by River.
func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	a := job.Args
	link := w.n.cfg.LinkBase + "/v1/ops/" + url.PathEscape(a.Key)
	amount := "no amount"
	switch {
	case a.Payment != nil:
		amount = a.Payment.Describe(deref(a.Amount), a.Amount != nil)
	case a.Amount != nil:
		amount = money.Format(*a.Amount, a.Currency)
	}
	body, err := json.Marshal(notification{Event: "approval_requested", OpID: a.OpID, TenantID: a.TenantID, Key: a.Key,
		Tool: a.Tool, Amount: a.Amount, Currency: a.Currency, Why: a.Why, ConversationID: a.ConversationID,
		RequestedAt: a.RequestedAt, Payment: a.Payment, Link: link,
		Text: fmt.Sprintf("oncebox: %s (%s) awaits approval: %s %s", a.Tool, amount, a.Why, link)})
	if err != nil {
		return fmt.Errorf("notify: marshal: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: request: %w", err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Oncebox-Notification-Id", a.OpID)
	req.Header.Set("Oncebox-Timestamp", ts)
	req.Header.Set("Oncebox-Signature", "t="+ts+",v1="+Sign(w.n.cfg.Secret, ts, body))
	resp, err := w.n.client.Do(req)
	if err != nil {
		// The URL may hold a credential: name the op, not the URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		w.n.deps.Logger.Warn("approval notification not delivered; River retries it", slog.String("op_id", a.OpID),
			slog.Int("attempt", job.Attempt), slog.Any("error", err))
		return fmt.Errorf("notify: op %s: %w", a.OpID, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		w.n.deps.Logger.Warn("approval notification refused; River retries it", slog.String("op_id", a.OpID),
			slog.Int("attempt", job.Attempt), slog.Int("status", resp.StatusCode))
		return fmt.Errorf("notify: op %s: receiver answered %d", a.OpID, resp.StatusCode)
	}
	return nil
}

// Sign returns the hex HMAC-SHA256, under secret, of "<timestamp>.<body>":
// what the v1 part of Oncebox-Signature carries. A receiver recomputes it, compares in
// constant time, and refuses timestamps too far from its clock.
func Sign(secret []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// deref returns *n, or 0 for nil.
func deref(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}
