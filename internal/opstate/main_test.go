package opstate

import (
	"testing"

	"github.com/oncebox/oncebox/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
