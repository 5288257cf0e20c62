package bench_test

import (
	"testing"

	"github.com/oncebox/oncebox/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
