package audit_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// received is one log record as an OTLP receiver decoded it, with its resource's
// service.name.
type received struct {
	Service string
	Record  *logspb.LogRecord
}

// attr returns the record's attribute key (nil when it has none).
func (r received) attr(key string) *commonpb.AnyValue {
	for _, kv := range r.Record.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// receiver is an OTLP/HTTP logs receiver: it decodes each request's protobuf and keeps its
// records, or answers 503 while fail is above zero (after keeping them when keepFailed).
type receiver struct {
	mu         sync.Mutex
	records    []received
	requests   int
	fail       int
	keepFailed bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req collogs.ExportLogsServiceRequest
	if err != nil || r.URL.Path != "/v1/logs" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP logs request", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	failing := rc.fail > 0
	if failing {
		rc.fail--
	}
	if !failing || rc.keepFailed {
		for _, rl := range req.GetResourceLogs() {
			service := ""
			for _, kv := range rl.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, sl := range rl.GetScopeLogs() {
				for _, lr := range sl.GetLogRecords() {
					rc.records = append(rc.records, received{Service: service, Record: lr})
				}
			}
		}
	}
	if failing {
		http.Error(w, "collector overloaded", http.StatusServiceUnavailable)
		return
	}
	out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.records...)
}

func (rc *receiver) failNext(n int, keep bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.fail, rc.keepFailed = n, keep
}

// newStreamer returns a streamer of pool's audit log to a new receiver, through the OTLP
// HTTP exporter (retries as retry says).
func newStreamer(t *testing.T, pool *pgxpool.Pool, batch int, retry otlploghttp.RetryConfig) (*audit.Streamer, *receiver) {
	t.Helper()
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(srv.URL+"/v1/logs"),
		otlploghttp.WithRetry(retry), otlploghttp.WithTimeout(5*time.Second))
	require.NoError(t, err)
	s, err := audit.NewStreamer(audit.StreamConfig{Pool: pool, Exporter: exp, Batch: batch,
		Resource: resource.NewSchemaless(semconv.ServiceName("oncebox-test")), Interval: 20 * time.Millisecond})
	require.NoError(t, err)
	return s, rc
}

// sealed reads tenant's sealed entries in chain order.
func sealed(t *testing.T, pool *pgxpool.Pool, tenant int64) []*audit.Entry {
	t.Helper()
	var out []*audit.Entry
	require.NoError(t, audit.Export(context.Background(), pool, audit.ExportParams{TenantID: tenant}, func(e *audit.Entry) error {
		if e.Hash != nil {
			out = append(out, e)
		}
		return nil
	}))
	return out
}

// seqsOf returns the seqs of tenant's records, in the order received, deduplicated by
// seq as a SIEM does when dedupe is set (the first copy kept).
func seqsOf(records []received, tenant int64, dedupe bool) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, r := range records {
		if r.attr(audit.AttrTenantID).GetIntValue() != tenant {
			continue
		}
		seq := r.attr(audit.AttrSeq).GetIntValue()
		if dedupe && seen[seq] {
			continue
		}
		seen[seq] = true
		out = append(out, seq)
	}
	return out
}

func seqs(entries []*audit.Entry) []int64 {
	out := make([]int64, len(entries))
	for i, e := range entries {
		out[i] = e.Seq
	}
	return out
}

// cursor is tenant's stored stream cursor: the seq of the last exported entry and how
// many entries were exported (0, 0: none).
func cursor(t *testing.T, pool *pgxpool.Pool, tenant int64) (seq, entries int64) {
	t.Helper()
	_ = pool.QueryRow(context.Background(), "SELECT seq, entries FROM oncebox_audit_stream WHERE tenant_id = $1", tenant).Scan(&seq, &entries)
	return seq, entries
}

// TestStreamSendsEverySealedEntryOnceInOrder: a refund's story and a token's creation
// arrive at an OTLP receiver as one record per sealed entry, in chain order, with the
// entry's fields as attributes and no secret; a second round sends nothing, new entries
// follow once sealed.
func TestStreamSendsEverySealedEntryOnceInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenantID, op := story(t, pool)
	token, err := tenant.NewStore(pool).NewTokenFor(ctx, "acme", tenant.RoleApprover, "grace@acme.test")
	require.NoError(t, err)
	sealer := audit.NewSealer(audit.Config{Pool: pool})
	sealAll(t, sealer, pool, tenantID)
	want := sealed(t, pool, tenantID)

	s, rc := newStreamer(t, pool, 0, otlploghttp.RetryConfig{Enabled: false})
	n, err := s.StreamOnce(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, len(want))
	got := rc.got()
	require.Equal(t, seqs(want), seqsOf(got, tenantID, false), "every sealed entry once, in chain order")
	seq, exported := cursor(t, pool, tenantID)
	require.Equal(t, want[len(want)-1].Seq, seq)
	require.Equal(t, int64(len(want)), exported)

	byKind := map[string]received{}
	for i, r := range got {
		e := want[i]
		require.Equal(t, "oncebox-test", r.Service)
		require.Equal(t, logspb.SeverityNumber_SEVERITY_NUMBER_INFO, r.Record.GetSeverityNumber())
		require.Equal(t, "oncebox.audit."+e.Kind, r.Record.GetEventName())
		require.Equal(t, uint64(e.At.UnixNano()), r.Record.GetTimeUnixNano())
		require.WithinDuration(t, time.Now(), time.Unix(0, int64(r.Record.GetObservedTimeUnixNano())), time.Minute)
		require.Equal(t, e.Kind, r.attr(audit.AttrKind).GetStringValue())
		require.Equal(t, "acme", r.attr(audit.AttrTenantName).GetStringValue())
		require.Equal(t, hex.EncodeToString(e.Hash), r.attr(audit.AttrHash).GetStringValue())
		require.Equal(t, hex.EncodeToString(e.PrevHash), r.attr(audit.AttrPrevHash).GetStringValue())
		require.Equal(t, string(e.Fields), r.attr(audit.AttrEntry).GetStringValue())
		require.Equal(t, int64(e.Tx), r.attr(audit.AttrTx).GetIntValue())
		require.Equal(t, e.OpID, r.attr(audit.AttrOpID).GetStringValue())
		require.Zero(t, r.Record.GetDroppedAttributesCount())
		key := e.Kind
		if key == "setting" {
			key += " " + r.attr(audit.AttrFieldPrefix+"table").GetStringValue()
		}
		if _, ok := byKind[key]; !ok {
			byKind[key] = r
		}
	}
	call := byKind["call"]
	require.Equal(t, "op "+op+" called refund_payment on stripe", call.Record.GetBody().GetStringValue())
	require.Equal(t, "0102", call.attr(audit.AttrFingerprint).GetStringValue())
	require.Equal(t, "ada@acme.test", call.attr(audit.AttrFieldPrefix+"person").GetStringValue())
	require.Equal(t, int64(2500), call.attr(audit.AttrFieldPrefix+"amount").GetIntValue())
	require.Equal(t, "op "+op+": approved by grace@acme.test", byKind["event"].Record.GetBody().GetStringValue())
	require.Equal(t, "v7", byKind["event"].attr(audit.AttrFieldPrefix+"detail.policy_version").GetStringValue())
	require.Equal(t, "setting oncebox_api_token: insert", byKind["setting oncebox_api_token"].Record.GetBody().GetStringValue())
	require.Equal(t, "acme", byKind["setting oncebox_tenant"].attr(audit.AttrFieldPrefix+"row.name").GetStringValue())

	// No secret: neither a token nor its hash, in any form, in any body or attribute.
	hash := tenant.HashToken(token)
	for _, r := range got {
		text := r.Record.GetBody().String()
		for _, kv := range r.Record.GetAttributes() {
			text += "\n" + kv.GetValue().String()
		}
		for _, secret := range []string{token, hex.EncodeToString(hash), base64.StdEncoding.EncodeToString(hash), "deadbeefcafe", "3q2+7w", "5ec2e7", "sha256:x"} {
			require.NotContains(t, text, secret, "record seq %d", r.attr(audit.AttrSeq).GetIntValue())
		}
	}

	// Nothing new: nothing sent. A new entry is sent once it is sealed, and only it.
	n, err = s.StreamOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = pool.Exec(ctx, "INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, 'ops', '{}', 'ada')", tenantID)
	require.NoError(t, err)
	n, err = s.StreamOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "an unsealed entry is not sent")
	sealAll(t, sealer, pool, tenantID)
	// An entry written after the sealing stays behind the sealed ones sent.
	_, err = pool.Exec(ctx, "INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, 'later', '{}', 'ada')", tenantID)
	require.NoError(t, err)
	n, err = s.StreamOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	want = sealed(t, pool, tenantID)
	require.Equal(t, seqs(want), seqsOf(rc.got(), tenantID, false))
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_audit WHERE tenant_id = $1 AND hash IS NULL", tenantID),
		"the later entry is not sealed, and was not sent")
}

// TestStreamResendsAfterAFailedExport: with batches of 3, a receiver that refuses (503)
// the second batch keeps the cursor at the first batch's end; the next rounds send the
// rest and nothing twice. A receiver that keeps a batch yet answers 503 gets it again (at
// least once): deduplicated by seq, every entry arrives in order.
func TestStreamResendsAfterAFailedExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenantID, _ := story(t, pool)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool}), pool, tenantID)
	want := sealed(t, pool, tenantID)
	require.Greater(t, len(want), 6)

	s, rc := newStreamer(t, pool, 3, otlploghttp.RetryConfig{Enabled: false})
	// A fresh schema holds one tenant's entries: one export per round.
	n, err := s.StreamOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	rc.failNext(1, false)
	_, err = s.StreamOnce(ctx)
	require.ErrorContains(t, err, "collector overloaded")
	seq, exported := cursor(t, pool, tenantID)
	require.Equal(t, want[2].Seq, seq, "the cursor stays at the last batch accepted")
	require.Equal(t, int64(3), exported)

	rc.failNext(1, true)
	_, err = s.StreamOnce(ctx)
	require.Error(t, err)
	seq, _ = cursor(t, pool, tenantID)
	require.Equal(t, want[2].Seq, seq)
	for range len(want) {
		_, err := s.StreamOnce(ctx)
		require.NoError(t, err)
	}
	got := rc.got()
	require.Equal(t, seqs(want), seqsOf(got, tenantID, true), "nothing lost, in order")
	require.Len(t, seqsOf(got, tenantID, false), len(want)+3, "the batch kept and refused came twice, and only it")
	seq, exported = cursor(t, pool, tenantID)
	require.Equal(t, want[len(want)-1].Seq, seq)
	require.Equal(t, int64(len(want)), exported)
}

// TestStreamRunOutlastsAnOutage: Run against a receiver that answers 503 for a while (the
// exporter retrying) delivers every entry once it recovers, and stops with its context.
func TestStreamRunOutlastsAnOutage(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	tenantID, _ := story(t, pool)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool}), pool, tenantID)
	want := sealed(t, pool, tenantID)

	s, rc := newStreamer(t, pool, 2, otlploghttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 20 * time.Millisecond, MaxElapsedTime: 50 * time.Millisecond})
	rc.failNext(8, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	require.Eventually(t, func() bool {
		return len(seqsOf(rc.got(), tenantID, false)) >= len(want)
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	<-done
	require.Equal(t, seqs(want), seqsOf(rc.got(), tenantID, false), "every entry once, in order")
	rc.mu.Lock()
	require.Greater(t, rc.requests, 8, "the receiver refused 8 requests first")
	rc.mu.Unlock()
}

// TestStreamOneProcessAtATime: while another session holds the streamer's lock, a round
// sends nothing.
func TestStreamOneProcessAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenantID, _ := story(t, pool)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool}), pool, tenantID)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('oncebox_audit_stream ' || current_schema(), 0))")
	require.NoError(t, err)

	s, rc := newStreamer(t, pool, 0, otlploghttp.RetryConfig{Enabled: false})
	n, err := s.StreamOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, rc.got())

	_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended('oncebox_audit_stream ' || current_schema(), 0))")
	require.NoError(t, err)
	n, err = s.StreamOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, len(sealed(t, pool, tenantID)), n, fmt.Sprint(seqsOf(rc.got(), tenantID, false)))
	require.NotEmpty(t, strings.TrimSpace(rc.got()[0].Record.GetBody().GetStringValue()))
}
