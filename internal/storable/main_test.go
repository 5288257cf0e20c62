package storable_test

import (
	"testing"

	"github.com/oncebox/oncebox/internal/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
