package server_test

import "github.com/oncebox/oncebox/outbox"

func outboxPurgeConfig() outbox.PurgeConfig { return outbox.PurgeConfig{BatchSize: 10} }
