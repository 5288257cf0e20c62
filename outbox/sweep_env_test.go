package outbox_test

import (
	"testing"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// newSweepEnv builds an Outbox and a tenant in a fresh schema with the given vendors and
// reconciler configuration (not started), for the tests of what follows a sweep (manual
// review, vendor accounts). The reconciler's own tests are in package reconcile.
func newSweepEnv(t *testing.T, vendors []vendorapi.Vendor, cfg reconcile.Config) *optest.Env {
	t.Helper()
	return optest.NewEnv(t, outbox.Config{Reconcile: cfg}, vendors...)
}
