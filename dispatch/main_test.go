package dispatch_test

import (
	"os"
	"testing"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// The tests of this package that drive a whole dispatch build an Outbox (outbox.New
// builds the Dispatcher), as reconcile's tests do: the webhook vendor against a fake
// receiver, in a fresh schema (optest.NewWorkerOutbox).

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// This test binary was started by a test as a worker process to be killed.
		runChildWorker()
		return
	}
	dbtest.Main(m)
}
