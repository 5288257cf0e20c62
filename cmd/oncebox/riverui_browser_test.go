package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// uiJobArgs are the args of a job inserted for River UI to show: an op's id under the
// kind of oncebox's own jobs.
type uiJobArgs struct {
	kind string
	OpID string `json:"op_id"`
}

func (a uiJobArgs) Kind() string { return a.kind }

// TestRiverUIWithoutRiversGINIndexes drives River UI, as `oncebox serve` serves it at
// /riverui/, in headless Chromium, on v0.3.0's schema, without River's two GIN indexes
// (river_job_args_index, river_job_metadata_index), which migration 038 drops
// (docs/performance.md, River's GIN indexes). River UI (v0.22) filters its job list by
// state, id, kind, priority, queue and tag, none of them by args or metadata: its job
// list, a filter by kind and a job's page with its args and metadata all render. River's
// own JobList filters by metadata (JobListParams.Metadata, `metadata @>`) and by an
// arbitrary WHERE on args still answer, by a scan.
func TestRiverUIWithoutRiversGINIndexes(t *testing.T) {
	browserPath := chromiumPath(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := startConsoleServe(ctx, t)
	require.Zero(t, dbtest.Count(t, cs.pool, `SELECT count(*) FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'river_job' AND indexdef LIKE '%USING gin%'`))
	operator, err := cs.tenants.NewTokenWithRole(ctx, "acme", tenant.RoleOperator)
	require.NoError(t, err)

	// Jobs on a queue no process works, so that they stay available while the UI looks.
	inserter, err := river.NewClient(riverpgxv5.New(cs.pool), &river.Config{})
	require.NoError(t, err)
	opA, opB, other := uuid.NewString(), uuid.NewString(), uuid.NewString()
	var ids []int64
	for _, a := range []uiJobArgs{{"oncebox.dispatch", opA}, {"oncebox.dispatch", opB}, {"oncebox.notify_approval", other}} {
		res, err := inserter.Insert(ctx, a, &river.InsertOpts{Queue: "riverui_test", Metadata: []byte(`{"oncebox:test":"` + a.OpID + `"}`)})
		require.NoError(t, err)
		ids = append(ids, res.Job.ID)
	}

	bctx := newChromium(ctx, t, browserPath)
	require.NoError(t, chromedp.Run(bctx, network.Enable(),
		network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Bearer " + operator})))
	// shows opens path and waits until the page's text holds every one of want, then
	// returns that text.
	shows := func(path string, want ...string) string {
		t.Helper()
		require.NoError(t, chromedp.Run(bctx, chromedp.Navigate(cs.base+path)), path)
		var text string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			require.NoError(t, chromedp.Run(bctx, chromedp.Evaluate(`document.body.innerText`, &text)), path)
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(text, w) }) {
				break
			}
		}
		for _, w := range want {
			require.Contains(t, text, w, path)
		}
		return text
	}

	shows("/riverui/jobs?state=available", opA, opB, other)
	text := shows("/riverui/jobs?state=available&kind=oncebox.dispatch", opA, opB)
	require.NotContains(t, text, other, "the filter by kind leaves the other kind out")
	id := strconv.FormatInt(ids[0], 10)
	text = shows("/riverui/jobs/"+id, "ID: "+id, "oncebox.dispatch", "Args", `"op_id"`, "Metadata", `"oncebox:test"`)
	require.Equal(t, 2, strings.Count(text, opA), "the job's page shows the op's id in its args and in its metadata")

	// River's own filters by metadata and by args, which River UI does not offer.
	byMeta, err := inserter.JobList(ctx, river.NewJobListParams().Metadata(`{"oncebox:test":"`+opB+`"}`))
	require.NoError(t, err)
	require.Len(t, byMeta.Jobs, 1)
	require.Equal(t, ids[1], byMeta.Jobs[0].ID)
	byArgs, err := inserter.JobList(ctx, river.NewJobListParams().Where("args @> @args::jsonb", river.NamedArgs{"args": `{"op_id":"` + other + `"}`}))
	require.NoError(t, err)
	require.Len(t, byArgs.Jobs, 1)
	require.Equal(t, ids[2], byArgs.Jobs[0].ID)
}
