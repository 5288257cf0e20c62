package outbox_test

import (
	"os"
	"testing"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// This test binary was started by a test as a worker process to be killed.
		runChildWorker()
		return
	}
	dbtest.Main(m)
}
