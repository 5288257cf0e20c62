package outbox_test

import (
	"testing"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
}
