package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// VendorLatency is the vendor latency of the latency scenario.
const VendorLatency = 50 * time.Millisecond

// Sizes says how big each scenario is.
type Sizes struct {
	// EnqueueDuration is how long each enqueue, baseline and replay measurement runs.
	EnqueueDuration time.Duration
	// Callers are the concurrent caller counts of the enqueue scenario.
	Callers []int
	// ReplayCallers is the caller count of the replay scenario.
	ReplayCallers int
	// EndToEndOps is how many ops (and River jobs) the end-to-end scenario works.
	EndToEndOps int
	// EndToEndWorkers is the queue's MaxWorkers in the end-to-end scenario, for oncebox
	// and River alike.
	EndToEndWorkers int
	// LatencyWorkers are the worker counts of the vendor latency scenario.
	LatencyWorkers []int
	// MaxLatencyWorkers bounds the doubling of the worker count past the last of
	// LatencyWorkers while throughput keeps growing (by 1.5× per doubling or more).
	MaxLatencyWorkers int
	// LatencyRounds sets each latency measurement's ops to workers × LatencyRounds.
	LatencyRounds int
	// SweepOps is the size of the sweeper's op table; 1% of it is unknown.
	SweepOps int
}

// FullSizes are the sizes of `oncebox bench`, a few minutes on 2 cores.
func FullSizes() Sizes {
	return Sizes{
		EnqueueDuration:   3 * time.Second,
		Callers:           []int{1, 8, 32},
		ReplayCallers:     8,
		EndToEndOps:       5000,
		EndToEndWorkers:   100,
		LatencyWorkers:    []int{50, 100, 200, 400},
		MaxLatencyWorkers: 1600,
		LatencyRounds:     40,
		SweepOps:          100_000,
	}
}

// QuickSizes are the sizes of `oncebox bench --quick`, about a minute.
func QuickSizes() Sizes {
	return Sizes{
		EnqueueDuration:   time.Second,
		Callers:           []int{1, 8, 32},
		ReplayCallers:     8,
		EndToEndOps:       1000,
		EndToEndWorkers:   100,
		LatencyWorkers:    []int{50, 100, 200, 400},
		MaxLatencyWorkers: 400,
		LatencyRounds:     8,
		SweepOps:          10_000,
	}
}

func (s Sizes) validate() error {
	switch {
	case s.EnqueueDuration <= 0:
		return errors.New("bench: Sizes.EnqueueDuration must be positive")
	case len(s.Callers) == 0 || slices.Min(s.Callers) < 1:
		return errors.New("bench: Sizes.Callers needs caller counts of 1 or more")
	case s.ReplayCallers < 1:
		return errors.New("bench: Sizes.ReplayCallers must be 1 or more")
	case s.EndToEndOps < 1 || s.EndToEndWorkers < 1:
		return errors.New("bench: Sizes.EndToEndOps and EndToEndWorkers must be 1 or more")
	case len(s.LatencyWorkers) == 0 || slices.Min(s.LatencyWorkers) < 1 || s.LatencyRounds < 1:
		return errors.New("bench: Sizes.LatencyWorkers and LatencyRounds must be 1 or more")
	case s.SweepOps < sweepUnknownEvery:
		return fmt.Errorf("bench: Sizes.SweepOps must be %d or more (1%% of them are unknown)", sweepUnknownEvery)
	}
	return nil
}

// sweepUnknownEvery makes 1% of the sweeper's ops unknown.
const sweepUnknownEvery = 100

// linearRatio is the share of the ideal throughput that counts as linear scaling.
const linearRatio = 0.8

// Config configures Run.
type Config struct {
	// DatabaseURL is the Postgres to measure. Every scenario runs in a fresh schema of
	// its own, dropped at the end. Required.
	DatabaseURL string
	// Quick shrinks every scenario so the whole run takes about a minute. Defaults to
	// false (FullSizes).
	Quick bool
	// Sizes, when set, replaces FullSizes or QuickSizes.
	Sizes *Sizes
	// Out receives the Markdown table and the machine line. Defaults to discarding them.
	Out io.Writer
	// Progress receives one line per measurement while the run goes on. Defaults to
	// discarding them.
	Progress io.Writer
}

// Scenarios returns the names of the rows Run prints for sizes, in order. The vendor
// latency scenario may add rows for worker counts past sizes.LatencyWorkers.
func Scenarios(sizes Sizes) []string {
	var out []string
	for _, api := range []string{"Go API", "HTTP"} {
		for _, c := range sizes.Callers {
			out = append(out, enqueueName(api, c))
		}
	}
	for _, c := range sizes.Callers {
		out = append(out, enqueueUniqueName(c))
	}
	e2e := endToEndName(sizes.EndToEndOps)
	out = append(out, replayName(sizes.ReplayCallers), e2e, e2e+againstFloor, e2e+againstPeer,
		endToEndInTxName(sizes.EndToEndOps)+againstFloor, endToEndInTxName(sizes.EndToEndOps)+againstPeer,
		e2e+againstClaimCommit, endToEndClaimCommitName(sizes.EndToEndOps)+againstPeer,
		enqueueTracedName(), endToEndTracedName(sizes.EndToEndOps))
	for _, w := range sizes.LatencyWorkers {
		out = append(out, latencyName(w))
	}
	return append(out, latencyFloorName(latencyFloorWorkers(sizes)), latencyPeakName, latencyMonotonicName,
		sweepName(sizes.SweepOps), sweepOneName(), sweepEmptyName(sizes.SweepOps))
}

// latencyFloorWorkers is the worker count at which the latency scenario also measures
// the floor: latencyTargetWorkers, or the first count when it is not among them.
func latencyFloorWorkers(sizes Sizes) int {
	if slices.Contains(sizes.LatencyWorkers, latencyTargetWorkers) {
		return latencyTargetWorkers
	}
	return sizes.LatencyWorkers[0]
}

func latencyFloorName(workers int) string {
	return latencyName(workers) + againstFloor
}

// The suffixes of the end-to-end rows compared with the floor and the peer.
const (
	againstFloor = ", against the floor"
	againstPeer  = ", against the peer"
)

func enqueueUniqueName(callers int) string {
	return enqueueName("Go API", callers) + ", against River unique insert"
}

func callersText(n int) string {
	if n == 1 {
		return "1 caller"
	}
	return strconv.Itoa(n) + " callers"
}

func enqueueName(api string, callers int) string {
	return "enqueue (" + api + "), " + callersText(callers)
}

func replayName(callers int) string {
	return "replay of an existing key, " + callersText(callers)
}

func endToEndInTxName(ops int) string {
	return endToEndName(ops) + ", --batched-completion=false"
}

// againstClaimCommit names the row of the default end to end against --claim-commit.
const againstClaimCommit = ", against --claim-commit"

func endToEndClaimCommitName(ops int) string {
	return endToEndName(ops) + ", --claim-commit"
}

func endToEndName(ops int) string {
	return "end to end, " + groupThousands(int64(ops)) + " ops, zero-latency webhook"
}

func latencyName(workers int) string {
	return fmt.Sprintf("%d ms vendor latency, %d workers", VendorLatency.Milliseconds(), workers)
}

const latencyPeakName = "50 ms vendor latency: peak throughput (linear = ≥ 0.8× ideal)"

const latencyMonotonicName = "50 ms vendor latency: throughput as workers are added"

func sweepName(ops int) string {
	return fmt.Sprintf("sweeper: %s unknown among %s ops, resolved", groupThousands(int64(ops/sweepUnknownEvery)), groupThousands(int64(ops)))
}

func sweepOneName() string {
	return "sweeper: one sweep (ReconcileOnce) of up to 100 candidates (default BatchSize)"
}

func sweepEmptyName(ops int) string {
	return "sweeper: one sweep (ReconcileOnce) with nothing due among " + groupThousands(int64(ops)) + " ops"
}

// Run measures every scenario against its baseline in this one process and returns the
// rows; it writes the Markdown table to cfg.Out.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("bench: Config.DatabaseURL is required (set DATABASE_URL or --database-url)")
	}
	sizes := FullSizes()
	if cfg.Quick {
		sizes = QuickSizes()
	}
	if cfg.Sizes != nil {
		sizes = *cfg.Sizes
	}
	if err := sizes.validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	r := &runner{url: cfg.DatabaseURL, sizes: sizes, progress: progress, res: &Results{}}
	if err := r.machine(ctx); err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{r.enqueue, r.endToEnd, r.tracing, r.latency, r.sweep} {
		if err := step(ctx); err != nil {
			return r.res, err
		}
	}
	if cfg.Out != nil {
		if err := r.res.WriteMarkdown(cfg.Out); err != nil {
			return r.res, fmt.Errorf("bench: write table: %w", err)
		}
	}
	return r.res, nil
}

// runner carries one Run.
type runner struct {
	url      string
	sizes    Sizes
	progress io.Writer
	res      *Results
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, format+"\n", args...)
}

func (r *runner) add(row Row) {
	r.res.Rows = append(r.res.Rows, row)
	if row.Baseline != "" {
		r.logf("%s: %s (%s: %s, %.2f×)", row.Scenario, formatFigure(row.Rate, row.Unit), row.Baseline, formatFigure(row.BaselineRate, row.Unit), row.Ratio)
	} else {
		r.logf("%s: %s", row.Scenario, formatFigure(row.Rate, row.Unit))
	}
}

func (r *runner) machine(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		return fmt.Errorf("bench: connect to Postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fmt.Errorf("bench: SHOW server_version: %w", err)
	}
	r.res.Machine = Machine{CPUs: runtime.NumCPU(), Postgres: version, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	return nil
}

// withSchema runs f on a fresh schema and drops it afterwards.
func (r *runner) withSchema(ctx context.Context, maxConns int32, f func(s *Schema) error) error {
	s, err := NewSchema(ctx, r.url, maxConns)
	if err != nil {
		return err
	}
	ferr := f(s)
	cerr := s.Close(ctx)
	if ferr != nil {
		return ferr
	}
	return cerr
}

// EnqueuePoolSize is the pool size the enqueue scenarios need for callers callers.
func EnqueuePoolSize(callers []int) int32 { return int32(slices.Max(callers) + 4) }

// DispatchPoolSize is the pool size of the dispatch scenarios, oncebox and River alike.
const DispatchPoolSize = 32

func (r *runner) enqueue(ctx context.Context) error {
	size := EnqueuePoolSize(append(slices.Clone(r.sizes.Callers), r.sizes.ReplayCallers))
	return r.withSchema(ctx, size, func(s *Schema) error {
		e, err := NewEnqueuer(ctx, s.Pool)
		if err != nil {
			return err
		}
		defer e.Close()
		load := Load{Duration: r.sizes.EnqueueDuration}
		var goRows, httpRows, uniqueRows []Row
		for _, c := range r.sizes.Callers {
			base, err := e.RiverInsert(ctx, c, load)
			if err != nil {
				return err
			}
			unique, err := e.RiverUniqueInsert(ctx, c, load)
			if err != nil {
				return err
			}
			g, err := e.Go(ctx, c, load)
			if err != nil {
				return err
			}
			h, err := e.HTTP(ctx, c, load)
			if err != nil {
				return err
			}
			baseName := "River InsertTx, " + callersText(c)
			goRows = append(goRows, ratioRow(enqueueName("Go API", c), g, baseName, base, 0))
			httpRows = append(httpRows, ratioRow(enqueueName("HTTP", c), h, baseName, base, 0))
			uniqueRows = append(uniqueRows, ratioRow(enqueueUniqueName(c), g,
				"River unique insert (UniqueOpts{ByArgs: true}), "+callersText(c), unique, 0.8))
			r.logf("measured enqueue at %s", callersText(c))
		}
		for _, row := range slices.Concat(goRows, httpRows, uniqueRows) {
			r.add(row)
		}
		c := r.sizes.ReplayCallers
		fresh, err := e.Go(ctx, c, load)
		if err != nil {
			return err
		}
		replay, err := e.Replay(ctx, c, load)
		if err != nil {
			return err
		}
		r.add(ratioRow(replayName(c), replay, "fresh enqueue, "+callersText(c), fresh, 2))
		return nil
	})
}

func (r *runner) endToEnd(ctx context.Context) error {
	settings := Tuned(r.sizes.EndToEndWorkers)
	ops := r.sizes.EndToEndOps
	params := DispatchParams{Ops: ops, Settings: settings}
	inTxParams := params
	inTxParams.CompleteInTx = true
	claimParams := params
	claimParams.ClaimCommit = true
	var base, floor, peer, m, inTx, claimCommit Measure
	for _, step := range []struct {
		into *Measure
		run  func(context.Context, *pgxpool.Pool) (Measure, error)
	}{
		{&base, func(ctx context.Context, pool *pgxpool.Pool) (Measure, error) {
			return RiverEndToEnd(ctx, pool, ops, settings)
		}},
		{&floor, func(ctx context.Context, pool *pgxpool.Pool) (Measure, error) { return Floor(ctx, pool, params) }},
		{&peer, func(ctx context.Context, pool *pgxpool.Pool) (Measure, error) { return Peer(ctx, pool, params) }},
		{&m, func(ctx context.Context, pool *pgxpool.Pool) (Measure, error) { return EndToEnd(ctx, pool, params) }},
		{&inTx, func(ctx context.Context, pool *pgxpool.Pool) (Measure, error) {
			return EndToEnd(ctx, pool, inTxParams)
		}},
		{&claimCommit, func(ctx context.Context, pool *pgxpool.Pool) (Measure, error) {
			return EndToEnd(ctx, pool, claimParams)
		}},
	} {
		err := r.withSchema(ctx, DispatchPoolSize, func(s *Schema) error {
			var err error
			*step.into, err = step.run(ctx, s.Pool)
			return err
		})
		if err != nil {
			return err
		}
	}
	same := fmt.Sprintf("%s ops, same settings (%d workers, cooldown %s, poll %s)",
		groupThousands(int64(ops)), settings.Workers, settings.FetchCooldown, settings.FetchPollInterval)
	riverName := "River no-op worker, " + same
	floorName := fmt.Sprintf("floor: bare pgx, claim commit + call + record commit, %s ops, %d workers", groupThousands(int64(ops)), settings.Workers)
	peerName := "peer: River worker, claim commit + call + record with JobCompleteTx, " + same
	name := endToEndName(ops)
	r.add(ratioRow(name, m, riverName, base, 0))
	r.add(ratioRow(name+againstFloor, m, floorName, floor, 0.6))
	r.add(ratioRow(name+againstPeer, m, peerName, peer, 1.5))
	r.add(ratioRow(endToEndInTxName(ops)+againstFloor, inTx, floorName, floor, 0.6))
	r.add(ratioRow(endToEndInTxName(ops)+againstPeer, inTx, peerName, peer, 1.5))
	// The clean runs' gain, measured in the same run: the default against a claim
	// commit before every call (as before).
	r.add(ratioRow(name+againstClaimCommit, m, endToEndClaimCommitName(ops), claimCommit, 0))
	r.add(ratioRow(endToEndClaimCommitName(ops)+againstPeer, claimCommit, peerName, peer, 1.5))
	return nil
}

// Latency measures one worker count of the vendor latency scenario in a fresh schema.
func Latency(ctx context.Context, url string, workers, rounds int) (Measure, error) {
	var m Measure
	s, err := NewSchema(ctx, url, DispatchPoolSize)
	if err != nil {
		return m, err
	}
	m, err = EndToEnd(ctx, s.Pool, DispatchParams{Ops: workers * rounds, Settings: Tuned(workers), VendorLatency: VendorLatency})
	if cerr := s.Close(ctx); err == nil {
		err = cerr
	}
	return m, err
}

// IdealLatencyRate is the throughput of workers that each wait VendorLatency per op
// and spend nothing else.
func IdealLatencyRate(workers int) float64 { return float64(workers) / VendorLatency.Seconds() }

// FloorLatency measures the floor (Floor) with the latency scenario's vendor latency,
// workers and ops, in a fresh schema.
func FloorLatency(ctx context.Context, url string, workers, rounds int) (Measure, error) {
	var m Measure
	s, err := NewSchema(ctx, url, DispatchPoolSize)
	if err != nil {
		return m, err
	}
	m, err = Floor(ctx, s.Pool, DispatchParams{Ops: workers * rounds, Settings: Tuned(workers), VendorLatency: VendorLatency})
	if cerr := s.Close(ctx); err == nil {
		err = cerr
	}
	return m, err
}

func (r *runner) latency(ctx context.Context) error {
	counts := slices.Clone(r.sizes.LatencyWorkers)
	floorWorkers := latencyFloorWorkers(r.sizes)
	var rates, ratios []float64
	var atFloorWorkers Measure
	for i := 0; i < len(counts); i++ {
		w := counts[i]
		m, err := Latency(ctx, r.url, w, r.sizes.LatencyRounds)
		if err != nil {
			return err
		}
		if w == floorWorkers {
			atFloorWorkers = m
		}
		ideal := IdealLatencyRate(w)
		row := Row{Scenario: latencyName(w), Rate: m.Rate(), Unit: "ops/s", Baseline: "ideal: workers / 50 ms",
			BaselineRate: ideal, Ratio: m.Rate() / ideal}
		if w == latencyTargetWorkers {
			row.Target, row.Verdict = "≥ 0.8×", Missed
			if row.Ratio >= linearRatio {
				row.Verdict = Met
			}
		}
		r.add(row)
		rates = append(rates, row.Rate)
		ratios = append(ratios, row.Ratio)
		last := i == len(counts)-1
		if last && i >= 1 && rates[i] >= 1.5*rates[i-1] && 2*w <= r.sizes.MaxLatencyWorkers {
			counts = append(counts, 2*w)
		}
	}
	floor, err := FloorLatency(ctx, r.url, floorWorkers, r.sizes.LatencyRounds)
	if err != nil {
		return err
	}
	r.add(ratioRow(latencyFloorName(floorWorkers), atFloorWorkers,
		fmt.Sprintf("floor: bare pgx, claim commit + call + record commit, %d workers, 50 ms vendor latency", floorWorkers), floor, 0))
	r.add(latencyPeakRow(rates, ratios))
	r.add(latencyMonotonicRow(counts, rates))
	return nil
}

// latencyTargetWorkers is the worker count whose latency row carries the ≥ 0.8× ideal
// target.
const latencyTargetWorkers = 100

// latencyMonotonicRow says whether throughput never fell as workers were added; its
// figure is the smallest ratio of one worker count's throughput to the previous one's
// (below 1× it fell).
func latencyMonotonicRow(counts []int, rates []float64) Row {
	row := Row{Scenario: latencyMonotonicName, Rate: 1, Unit: "×", Verdict: Met,
		Target: fmt.Sprintf("never falls (%d → %d workers)", counts[0], counts[len(rates)-1])}
	for i := 1; i < len(rates); i++ {
		if q := rates[i] / rates[i-1]; i == 1 || q < row.Rate {
			row.Rate = q
		}
	}
	if row.Rate < 1 {
		row.Verdict = Missed
	}
	return row
}

// latencyPeakRow summarizes the latency scenario: the peak throughput, and whether
// throughput stayed linear (every ratio to the ideal ≥ linearRatio) until it passed
// 1,000 ops/s.
func latencyPeakRow(rates, ratios []float64) Row {
	row := Row{Scenario: latencyPeakName, Rate: slices.Max(rates), Unit: "ops/s", Target: "linear to ≥ 1,000 ops/s", Verdict: Missed}
	for i, rate := range rates {
		if ratios[i] < linearRatio {
			break
		}
		if rate >= 1000 {
			row.Verdict = Met
			break
		}
	}
	return row
}

func (r *runner) sweep(ctx context.Context) error {
	var res SweepResult
	err := r.withSchema(ctx, 8, func(s *Schema) error {
		var err error
		res, err = Sweep(ctx, s.Pool, SweepParams{Ops: r.sizes.SweepOps, UnknownEvery: sweepUnknownEvery})
		return err
	})
	if err != nil {
		return err
	}
	r.add(Row{Scenario: sweepName(r.sizes.SweepOps), Rate: res.Rate(), Unit: "ops/s"})
	r.add(Row{Scenario: sweepOneName(), Rate: ms(res.PerSweep()), Unit: "ms"})
	r.add(Row{Scenario: sweepEmptyName(r.sizes.SweepOps), Rate: ms(res.EmptySweep), Unit: "ms"})
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
