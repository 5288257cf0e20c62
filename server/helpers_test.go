package server_test

import "github.com/oncebox/oncebox/purge"

func outboxPurgeConfig() purge.Config { return purge.Config{BatchSize: 10} }
