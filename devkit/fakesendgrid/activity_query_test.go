package fakesendgrid

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseActivityQuery(t *testing.T) {
	t.Parallel()
	msg := &Message{
		XMessageID: "ab_cd-EF",
		CustomArgs: map[string]string{"oncebox_op": "op_1", "tenant": "acme"},
		AcceptedAt: time.Date(2026, 3, 14, 15, 9, 26, 500_000_000, time.UTC),
	}
	entry := activityEntry{msg: msg, msgID: "ab_cd-EF.filterdrecv-0", to: "ann@example.com"}

	tests := []struct {
		query string
		match bool
	}{
		{`unique_args['oncebox_op']="op_1"`, true},
		{`unique_args['oncebox_op']="op_2"`, false},
		{`(unique_args['oncebox_op']="op_1")`, true},
		{` ( unique_args[ 'oncebox_op' ] = "op_1" ) `, true},
		{`unique_args["oncebox_op"]='op_1'`, true},
		{`unique_args['oncebox_op']="op_1" AND unique_args['tenant']="acme"`, true},
		{`(unique_args['oncebox_op']="op_1") and (unique_args['tenant']="other")`, false},
		{`((unique_args['oncebox_op']="op_1" AND unique_args['tenant']="acme"))`, true},
		{`msg_id LIKE 'ab_cd-EF%'`, true},
		{`msg_id like 'ab%'`, true},
		{`msg_id LIKE 'ab_cd-EF'`, false},
		{`msg_id LIKE 'zz%'`, false},
		{`msg_id LIKE '%filterdrecv-0'`, true},
		{`msg_id="ab_cd-EF.filterdrecv-0"`, true},
		{`last_event_time BETWEEN TIMESTAMP "2026-03-14T15:00:00Z" AND TIMESTAMP "2026-03-14T16:00:00Z"`, true},
		{`last_event_time BETWEEN TIMESTAMP "2026-03-14T15:09:26Z" AND TIMESTAMP "2026-03-14T15:09:26Z"`, true},
		{`last_event_time BETWEEN TIMESTAMP '2026-03-14T16:00:00+01:00' AND TIMESTAMP '2026-03-14T17:00:00+01:00'`, true},
		{`last_event_time BETWEEN TIMESTAMP "2026-03-14T15:09:27Z" AND TIMESTAMP "2026-03-14T16:00:00Z"`, false},
		{`msg_id LIKE 'ab%' AND last_event_time BETWEEN TIMESTAMP "2026-03-14T15:00:00Z" AND TIMESTAMP "2026-03-14T16:00:00Z" AND unique_args['tenant']="acme"`, true},
	}
	for _, tt := range tests {
		preds, err := parseActivityQuery(tt.query)
		require.NoError(t, err, tt.query)
		match := true
		for _, p := range preds {
			match = match && p(entry)
		}
		require.Equal(t, tt.match, match, tt.query)
	}
}

func TestParseActivityQueryRejects(t *testing.T) {
	t.Parallel()
	for _, q := range []string{
		`status="delivered"`,
		`unique_args['k']="v" OR unique_args['k']="w"`,
		`unique_args['k']="v" AND`,
		`(unique_args['k']="v"`,
		`unique_args['k']="v")`,
		`unique_args['k']="v" ANDunique_args['j']="w"`,
		`unique_args['k']=v`,
		`last_event_time BETWEEN TIMESTAMP "yesterday" AND TIMESTAMP "2026-03-14T16:00:00Z"`,
	} {
		_, err := parseActivityQuery(q)
		require.Error(t, err, q)
	}
}
