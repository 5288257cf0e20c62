package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncebox/oncebox/internal/sameorigin"
)

// Queue is the River queue of approval notifications.
const Queue = "oncebox_notify"

// Config sends a signed JSON POST to a URL whenever an op starts waiting for
// approval. The notification is a River job inserted in the op's own transaction (the
// outbox itself), so a crash loses none; it is delivered at least once, and the
// receiver deduplicates by the op id (member op_id, header Oncebox-Notification-Id).
type Config struct {
	// URL receives the POSTs. Required.
	URL string
	// Secret signs each body: header Oncebox-Signature is
	// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under Secret>". Required.
	Secret []byte
	// LinkBase, when set, prefixes the op's path in the notification's link (such as
	// "https://oncebox.example.com"); otherwise the link is the path alone.
	LinkBase string
	// Timeout bounds one POST. Defaults to 10 seconds.
	Timeout time.Duration
	// Client sends the POSTs. Defaults to a client with Timeout that follows no
	// redirect to another origin than URL's (the body and its signature stay there).
	Client *http.Client
}

// Args is the River job of one approval notification: a snapshot of what the
// receiver is told, taken when the op started waiting.
type Args struct {
	OpID           string    `json:"op_id"`
	TenantID       int64     `json:"tenant_id"`
	Key            string    `json:"key"`
	Tool           string    `json:"tool"`
	Amount         *int64    `json:"amount,omitempty"`
	Currency       string    `json:"currency,omitempty"`
	Why            string    `json:"why"`
	ConversationID string    `json:"conversation_id,omitempty"`
	RequestedAt    time.Time `json:"requested_at"`
	// Payment is the payment a refund gives money back from (Tool.RefundOf), as
	// oncebox's records said when the op started waiting.
	Payment *Payment `json:"payment,omitempty"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return "oncebox.notify_approval" }

// InsertOpts puts notifications on their own queue, retried for a day.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 25}
}

// notification is the body the receiver gets.
type notification struct {
	Event          string    `json:"event"`
	OpID           string    `json:"op_id"`
	TenantID       int64     `json:"tenant_id"`
	Key            string    `json:"key"`
	Tool           string    `json:"tool"`
	Amount         *int64    `json:"amount"`
	Currency       string    `json:"currency"`
	Why            string    `json:"why"`
	ConversationID string    `json:"conversation_id"`
	RequestedAt    time.Time `json:"requested_at"`
	Payment        *Payment  `json:"payment,omitempty"`
	Link           string    `json:"link"`
	// Text is a one-line summary, so that a Slack incoming webhook shows it as is.
	Text string `json:"text"`
}

// Deps is what the notifier uses of the Outbox that runs it; outbox.New hands it over.
type Deps struct {
	// Logger receives the notifier's log lines. Required.
	Logger *slog.Logger
}

// Notifier delivers approval notifications. The Outbox owns it: the Outbox inserts a
// notification job with the op that starts waiting (InsertTx), and the notifier's
// worker runs on the Outbox's River client.
type Notifier struct {
	cfg    Config
	client *http.Client
	deps   Deps
}

// New builds a Notifier from cfg, with its defaults filled in, and the Outbox's deps.
func New(cfg Config, deps Deps) (*Notifier, error) {
	if cfg.URL == "" || len(cfg.Secret) == 0 {
		return nil, errors.New("notify: Config needs a URL and a Secret")
	}
	if deps.Logger == nil {
		return nil, errors.New("notify: Deps needs Logger")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout, CheckRedirect: sameorigin.CheckRedirect("the --notify-url receiver")}
	}
	return &Notifier{cfg: cfg, client: client, deps: deps}, nil
}

// Register adds the notification worker to workers.
func (n *Notifier) Register(workers *river.Workers) error {
	if err := river.AddWorkerSafely(workers, &worker{n: n}); err != nil {
		return fmt.Errorf("notify: register worker: %w", err)
	}
	return nil
}

// Inserter inserts a River job in the caller's transaction; *river.Client[pgx.Tx]
// satisfies it.
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// InsertTx inserts the notification a in tx, the transaction in which its op starts
// waiting, with client: a crash loses none.
func (n *Notifier) InsertTx(ctx context.Context, tx pgx.Tx, client Inserter, a Args) error {
	if _, err := client.InsertTx(ctx, tx, a, nil); err != nil {
		return fmt.Errorf("notify: insert approval notification: %w", err)
	}
	return nil
}
