package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/oncebox/oncebox/vendors/fakesendgrid"
	"github.com/oncebox/oncebox/vendors/fakestripe"
)

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
