package dispatch_test

import (
	"testing"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// The tests of this package that drive a whole dispatch build an Outbox (outbox.New
// builds the Dispatcher), as reconcile's tests do: the webhook vendor against a fake
// receiver, in a fresh schema (optest.NewWorkerOutbox).

func TestMain(m *testing.M) { dbtest.Main(m) }
