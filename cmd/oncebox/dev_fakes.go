package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// devFakes are the fake vendors `oncebox dev` starts in process, for the vendors
// without real credentials.
type devFakes struct {
	// list is the fakes started, as name, URL pairs.
	list []string
	// postEvents start the fakes' signed events to the server once it listens at base.
	postEvents []func(base string) error
	// stripe and sendgrid are the Stripe and SendGrid fakes, nil where the vendor is
	// real.
	stripe   *fakestripe.Server
	sendgrid *fakesendgrid.Server
	// webhook is whether the webhook fake stands for every target.
	webhook bool
	// stops undo what start did, in reverse order (stop).
	stops []func()
}

// stop stops every fake started, the last started first.
func (f *devFakes) stop() {
	for i := len(f.stops) - 1; i >= 0; i-- {
		f.stops[i]()
	}
}

// start starts a fake for each vendor cfg has no credentials (or targets) for, and
// points cfg at it. What it started before an error, stop stops.
func (f *devFakes) start(cfg *server.Config, logger *slog.Logger) error {
	if cfg.StripeAPIKey == "" {
		if err := f.startStripe(cfg, logger); err != nil {
			return err
		}
	}
	if cfg.SendGridAPIKey == "" {
		if err := f.startSendGrid(cfg, logger); err != nil {
			return err
		}
	}
	if len(cfg.WebhookTargets) == 0 {
		url, stop, err := serveFake(fakewebhook.New(fakewebhook.Config{HonourKeys: true}))
		if err != nil {
			return err
		}
		f.stops = append(f.stops, stop)
		cfg.WebhookTargets = map[string]webhook.Target{"demo": {BaseURL: url}}
		cfg.WebhookNativeKeys, cfg.WebhookLookupPath = true, "/_lookup"
		f.list = append(f.list, "webhook \"demo\"", url)
		f.webhook = true
	}
	return nil
}

// env is what a CLI process beside dev needs to reach the fakes cfg points at (the
// settings start changed), as environment variable, value pairs: `reconcile report`
// lists their objects, `mcp` records ops for their tools.
func (f *devFakes) env(cfg server.Config) []string {
	var env []string
	add := func(flag, value string) { env = append(env, settingEnv(flag), value) }
	if f.stripe != nil {
		add("stripe-api-base", cfg.StripeAPIBase)
		add("stripe-api-key", cfg.StripeAPIKey)
	}
	if f.sendgrid != nil {
		add("sendgrid-api-base", cfg.SendGridAPIBase)
		add("sendgrid-api-key", cfg.SendGridAPIKey)
		add("sendgrid-lookup-lag", cfg.SendGridLookupLag.String())
		add("sendgrid-activity-rate", strconv.Itoa(cfg.SendGridActivityRate))
	}
	if f.webhook {
		targets, _ := json.Marshal(map[string]map[string]string{"demo": {"base_url": cfg.WebhookTargets["demo"].BaseURL}})
		add("webhook-targets", string(targets))
		add("webhook-native-keys", strconv.FormatBool(cfg.WebhookNativeKeys))
		add("webhook-lookup-path", cfg.WebhookLookupPath)
	}
	return env
}

// startStripe starts the Stripe fake, with signed events unless cfg has a webhook
// secret.
func (f *devFakes) startStripe(cfg *server.Config, logger *slog.Logger) error {
	fake := fakestripe.New(fakestripe.Config{Logger: logger, AnyAccount: true})
	f.stripe = fake
	url, stop, err := serveFake(fake)
	if err != nil {
		return err
	}
	f.stops = append(f.stops, stop, func() { _ = fake.SetEvents(nil) })
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_oncebox_dev", url
	f.list = append(f.list, "Stripe", url)
	if cfg.StripeWebhookSecret == "" {
		var k [16]byte
		_, _ = rand.Read(k[:])
		secret := "whsec_dev_" + hex.EncodeToString(k[:])
		cfg.StripeWebhookSecret = secret
		f.postEvents = append(f.postEvents, func(base string) error {
			return fake.SetEvents(&fakestripe.EventsConfig{Config: fakestripe.EventDelivery{URL: base + vendorevents.PathStripe}, Secret: secret})
		})
	}
	return nil
}

// startSendGrid starts the SendGrid fake, with signed events unless cfg has an event
// public key.
func (f *devFakes) startSendGrid(cfg *server.Config, logger *slog.Logger) error {
	fake := fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1, Logger: logger})
	f.sendgrid = fake
	url, stop, err := serveFake(fake)
	if err != nil {
		return err
	}
	f.stops = append(f.stops, stop, func() { _ = fake.SetEvents(nil) })
	if cfg.SendGridEventPublicKey == "" {
		key, pub, err := fakesendgrid.NewEventKey()
		if err != nil {
			return err
		}
		cfg.SendGridEventPublicKey = pub
		f.postEvents = append(f.postEvents, func(base string) error {
			return fake.SetEvents(&fakesendgrid.EventsConfig{Config: fakesendgrid.EventDelivery{URL: base + vendorevents.PathSendGrid}, Key: key})
		})
	}
	cfg.SendGridAPIKey, cfg.SendGridAPIBase = "SG.oncebox_dev", url
	// The fake has no activity lag; the lookup lag must still cover a job timeout
	// (a send may be on its way until then).
	cfg.SendGridLookupLag, cfg.SendGridActivityRate = max(5*time.Second, cfg.Queues["sendgrid"].JobTimeout), 600
	f.list = append(f.list, "SendGrid", url)
	return nil
}

// keep restores the fakes' objects beside pg's private cluster, which keeps earlier
// runs' ops, and returns the banner's note about it and save, which saves them at the
// end of the run. Without a private cluster or a Stripe or SendGrid fake, nothing is
// kept.
func (f *devFakes) keep(pg *localpg.Postgres) (note string, save func(*slog.Logger), err error) {
	if pg.DataDir == "" || (f.stripe == nil && f.sendgrid == nil) {
		return "", func(*slog.Logger) {}, nil
	}
	statePath := pg.DataDir + ".fakes.json"
	n, err := loadFakes(statePath, f.stripe, f.sendgrid)
	if err != nil {
		return "", nil, err
	}
	save = func(logger *slog.Logger) {
		if err := saveFakes(statePath, f.stripe, f.sendgrid); err != nil {
			logger.Warn("the fake vendors' objects were not saved; the next run starts them empty", slog.Any("error", err))
		}
	}
	return fmt.Sprintf("  (the fakes keep their objects beside the cluster, in %s: %d restored)\n", statePath, n), save, nil
}

// fakeState is what `oncebox dev`'s fake vendors hold, kept beside its private cluster
// between runs: the database keeps earlier runs' ops, so the fakes keep their objects,
// and a finance report in dev does not list every earlier op as missing at the vendor.
// Stored idempotency keys, faults and event settings are not kept.
type fakeState struct {
	StripePaymentIntents []fakestripe.PaymentIntent `json:"stripe_payment_intents,omitempty"`
	StripeRefunds        []fakestripe.Refund        `json:"stripe_refunds,omitempty"`
	SendGridMessages     []fakesendgrid.Message     `json:"sendgrid_messages,omitempty"`
}

// loadFakes restores the fakes' objects saved at path by an earlier run; a missing file
// is an empty state. Either fake may be nil (the vendor is real).
func loadFakes(path string, stripe *fakestripe.Server, sendgrid *fakesendgrid.Server) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the fake vendors' state: %w", err)
	}
	var st fakeState
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("read the fake vendors' state %s (delete it to start the fakes empty): %w", path, err)
	}
	n := 0
	if stripe != nil {
		for _, pi := range st.StripePaymentIntents {
			stripe.AddPaymentIntent(pi)
		}
		for _, re := range st.StripeRefunds {
			stripe.AddRefund(re)
		}
		n += len(st.StripePaymentIntents) + len(st.StripeRefunds)
	}
	if sendgrid != nil {
		for _, m := range st.SendGridMessages {
			sendgrid.AddMessage(m)
		}
		n += len(st.SendGridMessages)
	}
	return n, nil
}

// saveFakes writes the fakes' objects to path (mode 0600: the fake SendGrid's messages
// hold addresses), through a temporary file so that a crash leaves the old state whole.
func saveFakes(path string, stripe *fakestripe.Server, sendgrid *fakesendgrid.Server) error {
	var st fakeState
	if stripe != nil {
		st.StripePaymentIntents, st.StripeRefunds = stripe.PaymentIntents(), stripe.Refunds()
	}
	if sendgrid != nil {
		st.SendGridMessages = sendgrid.Messages()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("save the fake vendors' state: %w", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save the fake vendors' state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save the fake vendors' state: %w", err)
	}
	return nil
}
