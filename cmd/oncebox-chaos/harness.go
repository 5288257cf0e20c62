package main

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/protocol"
)

// Config is one chaos run.
type Config struct {
	// Ops is how many idempotency keys the run enqueues. Defaults to 2000.
	Ops int
	// Workers is how many `oncebox serve` processes run. Defaults to 2.
	Workers int
	// DurationCap bounds the whole run; unsettled ops at the cap count as
	// lost. Defaults to 6m.
	DurationCap time.Duration
	// EnqueueFor is how long the enqueueing (and the chaos) lasts. Defaults
	// to 40s.
	EnqueueFor time.Duration
	// Seed seeds the workload, the kills and the faults. Defaults to the
	// current time.
	Seed int64
	// DatabaseURL is an existing Postgres to use instead of a private
	// cluster; the Postgres restart is then skipped.
	DatabaseURL string
	// Keep keeps the logs even when the run is green.
	Keep bool
	// WebhookDefaultMode runs the serve processes in oncebox's default webhook
	// mode, native keys off: a share of the webhook ops then goes to a receiver
	// that does not deduplicate keys, and a few of them are answered only after
	// every serve process was SIGKILLed (the effect done, its answer never
	// heard), so that only a lookup after the lag can settle them. The default,
	// false, runs webhooks with --webhook-native-keys against a receiver that
	// deduplicates. The fake MCP upstream follows it: native_keys and deduplicating on
	// the _meta key by default, neither in the default webhook mode.
	WebhookDefaultMode bool
	// NoEvents runs without vendor events (the fakes post none, the serve processes
	// have no event secrets), to compare its needs_review count with a run that has
	// them. SendGrid's Email Activity API answers 403 for the first half of the chaos
	// either way, so without events mail ops may end in needs_review (the verdict
	// allows it, as for the blind webhook target).
	NoEvents bool
	// UpgradeFrom, a commit (make chaos-upgrade: .ci/previous-release), makes the run a
	// rolling upgrade: the serve processes start on that commit's oncebox with its
	// migrations, this tree's oncebox migrate runs at a quarter of the enqueueing, and
	// the processes are replaced by this tree's binary one by one before it ends, kills
	// and faults throughout. The verdict also wants every process replaced and the
	// mixed-version switch seen on and off again in this tree's processes.
	UpgradeFrom string
	// Partitions runs one serve process in a network namespace of its own and cuts its
	// link to Postgres (past the job timeout and --rescue-after), and later its link to
	// the fake vendors (past the job timeout), each then brought back. It needs root
	// and ip netns: without them the partitions are skipped with a log line, or, with
	// CI set, the run fails. Skipped with DatabaseURL, UpgradeFrom or Failover.
	Partitions bool
	// LongPGCut, when set (more than 100 s), makes the partition of the Postgres link a
	// long cut of that length (long_cut.go): by serve's --pg-dead-session-timeout and a
	// margin after it, no session of the cut process, and so no lock of one, may be left
	// in Postgres. Defaults to 0: the short partition.
	LongPGCut time.Duration
	// Failover, "sync" or "async" (make chaos-failover), runs the private primary with a
	// streaming standby, synchronous or not, and the serve processes on a multi-host
	// DATABASE_URL (target_session_attrs=read-write); instead of the Postgres crash, the
	// primary is SIGKILLed with the standby held back, and the standby promoted. The
	// verdict also counts what the old primary had that the new one never got: with
	// "sync" none of it may have been reported to a client and the verdict stays
	// strict; with "async" the findings about the ops it touched are counted, not
	// failed (failover.go).
	Failover string
	// HTTP2 serves the fake Stripe, SendGrid, webhook receivers and CRM over TLS offering
	// HTTP/2, with the late-delivery fault in front of those without keys (h2.go). Not
	// in a rolling upgrade: the previous release reaches them all over HTTP/2. The flag
	// --http2 defaults to true.
	HTTP2 bool
	// Out receives the report and the line of figures. Defaults to os.Stdout.
	Out io.Writer
	// Logger receives progress. Defaults to a text logger on os.Stderr.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Ops <= 0 {
		c.Ops = 2000
	}
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.DurationCap <= 0 {
		c.DurationCap = 6 * time.Minute
	}
	if c.EnqueueFor <= 0 {
		c.EnqueueFor = 40 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return c
}

// Exit codes of a run.
const (
	exitGreen  = 0
	exitBroken = 1 // a duplicate, a loss or another broken promise
	exitError  = 2 // the harness could not run
)

// pgDowntime is how long Postgres stays down when it is restarted.
const pgDowntime = 2 * time.Second

// lag is how far the fakes' search, activity and lookup endpoints lag behind.
const lag = 1500 * time.Millisecond

// vendorLag is the lookup lag the serve processes are told for every vendor: the
// fakes' lag with a margin. A process told less would trust an empty lookup
// that merely had not seen the object yet, and resend.
const vendorLag = lag + time.Second

// actLag is the lookup lag the serve processes are told for the vendors without
// idempotency keys (SendGrid, webhooks without native keys), whose resend acts again: a
// fake may act on a request it holds up to hangFor after it arrived, even after the
// client gave up, when a partition keeps the client's abort from reaching it (as a
// slow receiver behind a cut network does), and its lookup shows the act lag later.
// Measured from the client's give-up, that is less than hangFor + lag.
const actLag = hangFor + lag

// harness holds everything one run started.
type harness struct {
	cfg    Config
	logger *slog.Logger
	runID  string

	tmp, logDir, bin string
	// root is the module's folder.
	root string
	// toolsFile is the serve processes' tool catalog: the fake MCP upstreams.
	toolsFile string
	// fakemcpBin is the stdio fake MCP upstream every serve process starts, its mails
	// and crash knob in the shared state file mcpStdioState.
	fakemcpBin, mcpStdioState string
	// mcpStdioCrashes counts the crashes after acting asked of the stdio upstream.
	mcpStdioCrashes atomic.Int64

	pgMu  sync.Mutex
	pg    *localpg.Postgres
	pgCfg localpg.Config
	dbURL string
	pool  *pgxpool.Pool

	fakes *fakes
	procs []*serveProc
	// up is the rolling upgrade's state, with Config.UpgradeFrom.
	up upgrade
	// fo is the failover's state, with Config.Failover.
	fo failover
	// history records every API call of the run; client is the run's API client.
	history *recorder
	client  *client
	// tenants are the run's tenants, each on its own Stripe Connect account
	// (tenants.go); the first one's approver decides the gated ops.
	tenants []chaosTenant

	sealKey [32]byte

	kills, pgRestarts, selfExits atomic.Int64
	// pgCrashes counts the SIGKILLs of the postmaster, pauses the serve processes
	// stopped (SIGSTOP) past the job timeout and --rescue-after, then resumed.
	pgCrashes, pauses atomic.Int64
	pgRestartSkipped  bool
	broken            bool

	// ns is the network namespace of procs[0] (nil: no partitions, partitionSkipped
	// says why); partitions counts the partitions made, by path.
	ns               *netns
	partitionSkipped string
	partitions       [paths]atomic.Int64
	// long is what the long Postgres cut saw (nil: none).
	long *longCut

	// procMu serialises the stopping and starting of serve processes by the
	// kill loop, the kills after an effect and ensureRunning.
	procMu sync.Mutex
	// chaosOn is set while kills and faults are on.
	chaosOn atomic.Bool
	// effectKills counts the times every serve process was killed right after
	// a plain receiver's effect; lastEffectKill is when (unix nanoseconds).
	effectKills    atomic.Int64
	lastEffectKill atomic.Int64
	// mcpEffectKills and mcpAnswerKills count the same kills after the MCP upstream
	// recorded a mail (before its answer) and after it answered (before the serve
	// process could record the answer); lastMCPKill is the last of either.
	mcpEffectKills atomic.Int64
	mcpAnswerKills atomic.Int64
	lastMCPKill    atomic.Int64

	// approver decides the gated ops; gate is the hostile upstream's state (gated.go).
	approver string
	gate     gate
	hostile  hostileAnswers
	// crm is the CRM's state (crm.go).
	crm crmState
	// auditUnsealed is how many audit entries of the run's tenants the sealer had not
	// sealed when waitSealed ended (audit.go).
	auditUnsealed int
}

// Run runs the chaos harness and returns the process exit code.
func Run(ctx context.Context, cfg Config) int {
	cfg = cfg.withDefaults()
	h := &harness{cfg: cfg, logger: cfg.Logger, runID: strconv.FormatInt(cfg.Seed&0xffffff, 36), history: newRecorder()}
	_, _ = cryptorand.Read(h.sealKey[:])
	start := time.Now()
	defer h.cleanup()
	code, err := h.run(ctx, start)
	if err != nil {
		h.broken = true
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintln(cfg.Out, "chaos: error:", err)
		if h.logDir != "" {
			fmt.Fprintln(cfg.Out, "chaos: serve logs in", h.logDir)
		}
		return exitError
	}
	return code
}

func (h *harness) run(parent context.Context, start time.Time) (int, error) {
	cfg := h.cfg
	ctx, cancel := context.WithTimeout(parent, cfg.DurationCap)
	defer cancel()
	h.logger.Info("chaos run", slog.Int64("seed", cfg.Seed), slog.Int("ops", cfg.Ops), slog.Int("workers", cfg.Workers),
		slog.Duration("enqueue_for", cfg.EnqueueFor), slog.Duration("cap", cfg.DurationCap))

	if err := h.prepare(ctx); err != nil {
		return exitError, err
	}

	// The chaos phase: enqueue while processes are killed and Postgres restarts.
	h.newClient()
	chaosCtx, stopChaos := context.WithCancel(ctx)
	h.chaosOn.Store(true)
	var bg sync.WaitGroup
	bg.Go(func() { h.supervise(chaosCtx) })
	bg.Go(func() { h.killLoop(chaosCtx) })
	bg.Go(func() { h.crashLoop(chaosCtx) })
	bg.Go(func() { h.pauseLoop(chaosCtx) })
	bg.Go(func() { h.relistLoop(chaosCtx) })
	bg.Go(func() { h.oversizeLoop(chaosCtx) })
	bg.Go(func() { h.rssLoop(chaosCtx) })
	bg.Go(func() { h.resolveLoop(chaosCtx) })
	// The wipes are approved past their notes' TTL, also while the ops settle.
	approveCtx, stopApproving := context.WithCancel(ctx)
	defer stopApproving()
	var approving sync.WaitGroup
	approving.Go(func() { h.approveLoop(approveCtx) })
	var pgErr, crashErr, partErr, vendorPartErr error
	if h.ns != nil {
		bg.Go(func() { vendorPartErr = h.vendorPartitionLoop(chaosCtx) })
	}
	if h.pgRestartSkipped {
		h.logger.Info("Postgres restart and crash skipped: --database-url names a Postgres this harness does not own")
	} else {
		bg.Go(func() {
			select {
			case <-chaosCtx.Done():
			case <-time.After(cfg.EnqueueFor / 3):
				pgErr = h.restartPostgres(ctx, false)
			}
			select {
			case <-chaosCtx.Done():
			case <-time.After(cfg.EnqueueFor / 3):
				if cfg.Failover != "" {
					crashErr = h.failOver(ctx)
				} else {
					crashErr = h.restartPostgres(ctx, true)
				}
			}
			if h.ns == nil || crashErr != nil {
				return
			}
			// Then the Postgres link of the namespaced process, once the cluster is back:
			// it lasts its whole length even past the chaos.
			select {
			case <-chaosCtx.Done():
			case <-time.After(time.Second):
				if cfg.LongPGCut > 0 {
					partErr = h.longPGCut(ctx, cfg.LongPGCut)
				} else {
					partErr = h.partition(ctx, pathPostgres, pgPartitionLength)
				}
			}
		})
	}
	var upErr error
	if h.cfg.UpgradeFrom != "" {
		bg.Go(func() { upErr = h.upgradeLoop(chaosCtx, ctx) })
	}
	outcomes := h.enqueue(ctx)
	h.chaosOn.Store(false)
	stopChaos()
	bg.Wait()
	if err := errors.Join(pgErr, crashErr, upErr, partErr, vendorPartErr); err != nil {
		return exitError, err
	}
	if parent.Err() != nil {
		return exitError, parent.Err()
	}

	// Calm: no more faults or kills; every process up; wait for every op to settle.
	h.fakes.setFaults(false, 0)
	h.garbage(false)
	if err := h.calmStdioUpstream(); err != nil {
		return exitError, err
	}
	if err := h.ensureRunning(ctx); err != nil {
		return exitError, err
	}
	settleCtx, stopSupervising := context.WithCancel(ctx)
	bg.Go(func() { h.supervise(settleCtx) })
	bg.Go(func() { h.rssLoop(settleCtx) })
	settled := h.settle(ctx)
	stopApproving()
	approving.Wait()
	if settled {
		h.replaySettled(ctx, outcomes)
	}
	var upgradeOK = true
	if h.cfg.UpgradeFrom != "" {
		// The last previous-release process is gone: the switch goes off a lease (15 s)
		// after its last job, in every process.
		besideOld, on, off := len(h.procs)-1, 0, len(h.procs)
		if h.up.mixed.Load() {
			on, off = h.waitSwitchedOff(ctx, 60*time.Second)
		} else {
			// One protocol on both sides: nothing may switch.
			besideOld = 0
			on, _ = h.switchSeen()
		}
		contracted := !h.up.held.Load() || h.up.contracted.Load() != 0
		upgradeOK = h.up.migrated.Load() != 0 && int(h.up.replaced.Load()) == len(h.procs) && on == besideOld && off == len(h.procs) && contracted
		fmt.Fprintf(h.cfg.Out, "upgrade_from=%.7s migrated_mid_run=%t replaced=%d/%d mixed_switch_on=%d/%d mixed_switch_off=%d/%d contract_held=%t contract_applied=%t upgrade_ok=%t\n",
			h.cfg.UpgradeFrom, h.up.migrated.Load() != 0, h.up.replaced.Load(), len(h.procs), on, besideOld, off, len(h.procs),
			h.up.held.Load(), h.up.contracted.Load() != 0, upgradeOK)
	}
	// While the serve processes still run: their periodic role seals the audit log.
	h.auditUnsealed = h.waitSealed(ctx)
	stopSupervising()
	bg.Wait()
	for _, p := range h.procs {
		p.stop(10 * time.Second)
	}
	if parent.Err() != nil {
		return exitError, parent.Err()
	}

	delivered, dropped := h.fakes.eventStats()
	fmt.Fprintf(h.cfg.Out, "vendor_events=%t events_delivered=%d events_given_up=%d activity_forbidden_for=%s\n",
		!h.cfg.NoEvents, delivered, dropped, h.cfg.EnqueueFor/2)

	// Check with a context of its own: a run that hit its cap is still checked.
	checkCtx, cancelCheck := context.WithTimeout(context.WithoutCancel(parent), time.Minute)
	defer cancelCheck()
	code, err := h.check(checkCtx, outcomes, settled, start)
	if err == nil && code == exitGreen && !upgradeOK {
		h.broken = true
		fmt.Fprintln(h.cfg.Out, "chaos: the rolling upgrade did not complete: every process replaced, the mixed-version switch on in each one started while the previous release served, and off in every process at the end")
		return exitBroken, nil
	}
	return code, err
}

// prepare builds oncebox, starts Postgres and the fakes, migrates, creates the
// tenant and starts the serve processes.
func (h *harness) prepare(ctx context.Context) error {
	var err error
	if h.tmp, err = os.MkdirTemp("", "oncebox-chaos-"); err != nil {
		return fmt.Errorf("create a temporary folder: %w", err)
	}
	// Traversable: as root the private Postgres runs as an unprivileged user.
	if err := os.Chmod(h.tmp, 0o755); err != nil {
		return fmt.Errorf("open the temporary folder: %w", err)
	}
	h.logDir = filepath.Join(h.tmp, "logs")
	if err := os.Mkdir(h.logDir, 0o755); err != nil {
		return fmt.Errorf("create the log folder: %w", err)
	}

	// The namespace first: Postgres listens on its link.
	if err := h.setupNetns(ctx); err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		buildErr error
	)
	wg.Go(func() { buildErr = h.build(ctx) })
	pgErr := h.startPostgres(ctx)
	wg.Wait()
	if err := errors.Join(buildErr, pgErr); err != nil {
		return err
	}
	first := h.bin // the binary the run starts on
	if h.cfg.UpgradeFrom != "" {
		if err := h.buildPrevious(ctx, h.root); err != nil {
			return err
		}
		first = h.up.prevBin
	}

	if out, err := h.onceboxBin(ctx, first, "migrate", "--database-url", h.dbURL); err != nil {
		return fmt.Errorf("oncebox migrate: %w\n%s", err, out)
	}
	if h.pool, err = pgxpool.New(ctx, h.dbURL); err != nil {
		return fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := h.createTenants(ctx, first); err != nil {
		return err
	}

	var vtls *vendorTLS
	// Not in a rolling upgrade: the previous release reaches SendGrid and the webhooks
	// over HTTP/2, and the late deliveries would be its duplicates.
	if h.cfg.HTTP2 && h.cfg.UpgradeFrom == "" {
		ips := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		if h.ns != nil {
			ips = append(ips, h.ns.hostAddr(pathVendors))
		}
		if vtls, err = newVendorTLS(h.tmp, ips); err != nil {
			return err
		}
	}
	if h.fakes, err = startFakes(lag, vtls, h.cfg.Seed); err != nil {
		return err
	}
	for _, t := range h.tenants {
		if t.account != platformAccount {
			h.fakes.stripe.AddAccount(t.account)
		}
	}
	h.fakes.setFaults(true, h.cfg.Seed)
	if h.cfg.WebhookDefaultMode {
		h.fakes.plain.EffectHook(h.killAfterEffect)
	}
	h.fakes.mcp.SetNativeKeys(!h.cfg.WebhookDefaultMode)
	h.fakes.mcp.EffectHook(h.killAfterMCPEffect)
	h.fakes.mcp.AnswerHook(h.killAfterMCPAnswer)
	h.fakes.forbidActivity(h.cfg.EnqueueFor / 2)
	h.logger.Info("fakes serving", slog.String("stripe", h.fakes.stripeURL), slog.String("sendgrid", h.fakes.sendgridURL),
		slog.String("webhook", h.fakes.webhookURL), slog.String("plain_webhook", h.fakes.plainURL),
		slog.String("mcp", h.fakes.mcpURL), slog.Bool("webhook_native_keys", !h.cfg.WebhookDefaultMode))
	if err := h.prepareGated(ctx, h.tenants[0].name); err != nil {
		return err
	}
	if err := h.prepareCRM(ctx); err != nil {
		return err
	}
	h.mcpStdioState = filepath.Join(h.tmp, "mcp-stdio.json")
	host := procNet{dbURL: h.dbURL, vendors: h.fakes.urls(), toolsFile: filepath.Join(h.tmp, "tools.yaml")}
	if err := os.WriteFile(host.toolsFile, []byte(h.catalog(host.vendors)), 0o600); err != nil {
		return fmt.Errorf("write the tool catalog: %w", err)
	}
	h.toolsFile = host.toolsFile

	for i := range h.cfg.Workers {
		port, err := freePort()
		if err != nil {
			return err
		}
		p := &serveProc{name: fmt.Sprintf("serve-%d", i), bin: first, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			logPath: filepath.Join(h.logDir, fmt.Sprintf("serve-%d.log", i)), logger: h.logger}
		p.eventAddr = p.addr
		pn := host
		pn.listen = p.addr
		if i == 0 && h.ns != nil {
			if pn, err = h.namespacedNet(p, port); err != nil {
				return err
			}
		}
		// Odd processes complete jobs through River's batched completer, even ones with
		// JobCompleteTx, so both ways of finishing a job run under the same chaos.
		p.env = append(h.serveEnv(pn), "ONCEBOX_BATCHED_COMPLETION="+strconv.FormatBool(i%2 == 1))
		h.procs = append(h.procs, p)
		if err := p.start(); err != nil {
			return err
		}
	}
	if !h.cfg.NoEvents {
		addrs := make([]string, len(h.procs))
		for i, p := range h.procs {
			addrs[i] = p.eventAddr
		}
		if err := h.fakes.setEvents(addrs, h.cfg.Seed); err != nil {
			return err
		}
	}
	for _, p := range h.procs {
		if err := p.waitHealthy(ctx, 30*time.Second); err != nil {
			return err
		}
	}
	h.logger.Info("serve processes healthy", slog.Int("count", len(h.procs)), slog.String("logs", h.logDir))
	return nil
}

// build compiles ./cmd/oncebox and the stdio fake MCP upstream of the module the
// harness runs in.
func (h *harness) build(ctx context.Context) error {
	h.bin = filepath.Join(h.tmp, "bin", "oncebox")
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return errors.New("run the harness inside the oncebox module (go run ./cmd/oncebox-chaos)")
	}
	h.root = root
	h.fakemcpBin = filepath.Join(h.tmp, "bin", "fakemcp")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(h.tmp, "bin")+string(filepath.Separator),
		"./cmd/oncebox", "./devkit/fakemcp/cmd/fakemcp")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/oncebox ./devkit/fakemcp/cmd/fakemcp: %w\n%s", err, out)
	}
	return nil
}

// oncebox runs a one-shot oncebox command and returns its standard output.
func (h *harness) oncebox(ctx context.Context, args ...string) ([]byte, error) {
	return h.onceboxBin(ctx, h.bin, args...)
}

// onceboxBin runs a one-shot command of the oncebox binary bin.
func (h *harness) onceboxBin(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = baseEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// startPostgres starts the private cluster, or takes --database-url.
func (h *harness) startPostgres(ctx context.Context) error {
	if h.cfg.DatabaseURL != "" {
		h.dbURL = h.cfg.DatabaseURL
		h.pgRestartSkipped = true
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	h.pgCfg = localpg.Config{
		Env:           func(string) (string, bool) { return "", false },
		DataDir:       filepath.Join(h.tmp, "pgdata"),
		Port:          port,
		Database:      "oncebox_chaos",
		DisableDocker: true,
		// fsync, synchronous_commit and full_page_writes on: the Postgres crash must
		// not lose what was reported committed.
		Durable: true,
		Logger:  h.logger.With(slog.String("component", "localpg")),
	}
	if h.ns != nil {
		h.pgCfg.Networks = []netip.Prefix{h.ns.links[pathPostgres].hostAddr}
	}
	pg, err := localpg.Start(ctx, h.pgCfg)
	if err != nil {
		return fmt.Errorf("start a private Postgres: %w", err)
	}
	h.pg, h.dbURL = pg, pg.URL
	if h.cfg.Failover != "" {
		return h.startStandby(ctx)
	}
	return nil
}

// restartPostgres stops the private cluster (fast shutdown), or with crash SIGKILLs
// its postmaster (no shutdown checkpoint: the cluster recovers from its WAL), and
// starts it again on the same folder and port.
func (h *harness) restartPostgres(ctx context.Context, crash bool) error {
	h.pgMu.Lock()
	defer h.pgMu.Unlock()
	t0 := time.Now()
	was := h.pg.URL
	if crash {
		h.logger.Info("crashing Postgres (SIGKILL of the postmaster)")
		if err := h.pg.Crash(ctx); err != nil {
			return fmt.Errorf("crash Postgres: %w", err)
		}
	} else {
		h.logger.Info("restarting Postgres")
		if err := h.pg.Close(ctx); err != nil {
			h.logger.Warn("stop Postgres", slog.Any("error", err))
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(pgDowntime):
	}
	pg, err := localpg.Start(ctx, h.pgCfg)
	if err != nil {
		h.pg = nil
		return fmt.Errorf("start Postgres again: %w", err)
	}
	h.pg = pg
	if pg.URL != was {
		return fmt.Errorf("postgres came back under another URL: %s, was %s", pg.URL, was)
	}
	if crash {
		h.pgCrashes.Add(1)
	} else {
		h.pgRestarts.Add(1)
	}
	h.logger.Info("Postgres restarted", slog.Bool("after_crash", crash), slog.Duration("outage", time.Since(t0)))
	return nil
}

// pauseLength is how long a paused serve process stays stopped: longer than the job
// timeout (3s) and --rescue-after (10s) of serveEnv, so that River rescues its jobs on
// the other process while it still holds them, and its liveness lock (held all along:
// it is alive) keeps them from being taken over earlier.
const pauseLength = 12 * time.Second

// pauseLoop stops one serve process (SIGSTOP) for pauseLength a fifth into the chaos,
// then resumes it (SIGCONT): when it wakes up, its runs still hold jobs that were run
// again elsewhere, and the fences must keep them from recording anything.
func (h *harness) pauseLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), 0x5a05e))
	select {
	case <-ctx.Done():
		return
	case <-time.After(h.cfg.EnqueueFor / 5):
	}
	// The partitions' process is left to the partitions.
	candidates := h.procs
	if h.ns != nil {
		candidates = h.procs[1:]
	}
	p := candidates[rng.IntN(len(candidates))]
	// Up and healthy first (a kill may just have taken it down), and no kill meanwhile.
	p.spare()
	defer p.unspare()
	if err := h.upAndHealthy(ctx, p); err != nil {
		h.logger.Warn("pause: the process is not healthy; pausing it anyway", slog.String("proc", p.name), slog.Any("error", err))
	}
	h.logger.Info("pausing (SIGSTOP)", slog.String("proc", p.name), slog.Duration("for", pauseLength))
	if p.pauseFor(ctx, pauseLength) {
		h.pauses.Add(1)
		h.logger.Info("resumed (SIGCONT)", slog.String("proc", p.name))
	}
}

// procNet is where a serve process listens and reaches Postgres and the fakes, with
// the tool catalog that names the fake MCP upstream there.
type procNet struct {
	listen, dbURL string
	vendors       vendorURLs
	toolsFile     string
}

// namespacedNet puts p in the harness's network namespace: it listens on every
// address of the namespace at port, the harness reaches its API over the API link,
// the fakes post their events to it over the vendors link, and it reaches Postgres
// and the fakes on the host side of their links, with a catalog of its own.
func (h *harness) namespacedNet(p *serveProc, port int) (procNet, error) {
	ns := h.ns
	p.netns = ns.name
	p.addr = net.JoinHostPort(ns.peerAddr(pathAPI).String(), strconv.Itoa(port))
	p.eventAddr = net.JoinHostPort(ns.peerAddr(pathVendors).String(), strconv.Itoa(port))
	u, err := url.Parse(h.dbURL)
	if err != nil {
		return procNet{}, fmt.Errorf("parse the Postgres URL: %w", err)
	}
	u.Host = net.JoinHostPort(ns.hostAddr(pathPostgres).String(), u.Port())
	vendors, err := h.fakes.listenAlso(ns.hostAddr(pathVendors))
	if err != nil {
		return procNet{}, err
	}
	pn := procNet{listen: net.JoinHostPort("0.0.0.0", strconv.Itoa(port)), dbURL: u.String(), vendors: vendors,
		toolsFile: filepath.Join(h.tmp, "tools-"+p.name+".yaml")}
	if err := os.WriteFile(pn.toolsFile, []byte(h.catalog(vendors)), 0o600); err != nil {
		return procNet{}, fmt.Errorf("write the tool catalog of %s: %w", p.name, err)
	}
	h.logger.Info("serve process in a network namespace", slog.String("proc", p.name), slog.String("netns", ns.name),
		slog.String("api", p.addr), slog.String("events", p.eventAddr), slog.String("postgres", u.Host), slog.String("stripe", vendors.stripe))
	return pn, nil
}

// serveEnv is the environment of a serve process: short recovery settings and
// the fakes.
func (h *harness) serveEnv(n procNet) []string {
	targets := fmt.Sprintf(`{%q:{"base_url":%q},%q:{"base_url":%q},%q:{"base_url":%q}}`, webhookTarget, n.vendors.webhook,
		blindTarget, n.vendors.webhook+blindPrefix, plainTarget, n.vendors.plain)
	// Every process of the run shares one seal key, so mail args are stored only
	// encrypted and any process can dispatch them.
	sealKey := base64.StdEncoding.EncodeToString(h.sealKey[:])
	env := baseEnv()
	for k, v := range map[string]string{
		"DATABASE_URL":                    n.dbURL,
		"ONCEBOX_ADDR":                    n.listen,
		"ONCEBOX_ROLES":                   "api,worker,periodic",
		"ONCEBOX_MAX_ATTEMPTS":            "100",
		"ONCEBOX_RESCUE_AFTER":            "10s",
		"ONCEBOX_FETCH_POLL_INTERVAL":     "200ms",
		"ONCEBOX_SHUTDOWN_GRACE":          "3s",
		"ONCEBOX_MCP_WAIT":                "2s",
		"ONCEBOX_RECONCILE_INTERVAL":      "2s",
		"ONCEBOX_RECONCILE_SWEEP_TIMEOUT": "8s",
		"ONCEBOX_RECONCILE_RETRY_AFTER":   "2s",
		"ONCEBOX_RETRY_MAX_BACKOFF":       "2s",
		"ONCEBOX_SEAL_KEY":                sealKey,
		"ONCEBOX_STRIPE_WORKERS":          "16",
		"ONCEBOX_SENDGRID_WORKERS":        "16",
		"ONCEBOX_WEBHOOK_WORKERS":         "16",
		"ONCEBOX_STRIPE_JOB_TIMEOUT":      "3s",
		"ONCEBOX_SENDGRID_JOB_TIMEOUT":    "3s",
		"ONCEBOX_WEBHOOK_JOB_TIMEOUT":     "3s",
		"ONCEBOX_STRIPE_TIMEOUT":          "2s",
		"ONCEBOX_SENDGRID_TIMEOUT":        "2s",
		"ONCEBOX_WEBHOOK_TIMEOUT":         "2s",
		"ONCEBOX_STRIPE_SEARCH_LAG":       vendorLag.String(),
		"ONCEBOX_SENDGRID_LOOKUP_LAG":     max(actLag, 3*time.Second).String(), // at least the job timeout
		"ONCEBOX_WEBHOOK_LOOKUP_LAG":      max(actLag, 3*time.Second).String(), // at least the job timeout without native keys
		"ONCEBOX_SENDGRID_ACTIVITY_RATE":  "6000",
		"STRIPE_API_KEY":                  "sk_test_chaos",
		"STRIPE_API_BASE":                 n.vendors.stripe,
		"SENDGRID_API_KEY":                "SG.chaos",
		"SENDGRID_API_BASE":               n.vendors.sendgrid,
		"ONCEBOX_WEBHOOK_TARGETS":         targets,
		"ONCEBOX_WEBHOOK_NATIVE_KEYS":     strconv.FormatBool(!h.cfg.WebhookDefaultMode),
		"ONCEBOX_WEBHOOK_LOOKUP_PATH":     "/_lookup",
		"ONCEBOX_LOG_LEVEL":               "info",
		"ONCEBOX_TOOLS_FILE":              n.toolsFile,
	} {
		env = append(env, k+"="+v)
	}
	if h.fakes.tls != nil {
		// The fakes' certificate is the only one the serve processes need to trust.
		env = append(env, "SSL_CERT_FILE="+h.fakes.tls.certFile)
	}
	if h.crmOn() {
		env = append(env, "ONCEBOX_PURGE_INTERVAL="+crmPurgeInterval.String())
	}
	if !h.cfg.NoEvents {
		env = append(env, "STRIPE_WEBHOOK_SECRET="+h.fakes.eventSecret, "SENDGRID_EVENT_PUBLIC_KEY="+h.fakes.eventPubKey,
			"ONCEBOX_VENDOR_EVENT_LAG=20s")
	}
	return env
}

// catalog is the serve processes' tool catalog: the fake MCP upstreams, their send_mail
// tagged with the op id in ref and reconciled through find_mail. The HTTP one is the
// harness's, native_keys as the webhooks' (the fake deduplicates on the _meta key
// then), at mcpURL; the stdio one is a process each serve process starts, on one
// state file; then the composite tool (compositeCatalog) and the CRM (crm.go).
func (h *harness) catalog(v vendorURLs) string {
	tools := h.compositeCatalog() + h.crmCatalog()
	if tools != "" {
		tools = "tools:\n" + tools
	}
	return h.crmTargets(v.crm) + fmt.Sprintf(`upstreams:
  %s:
    url: %s
    native_keys: %t
    workers: 8
    rate: {per_second: 3, burst: 2}
    tools:
      send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}
%s  %s:
    command: %s
    args: [-state, %s]
    workers: 4
    tools:
      send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}
%s`, mcpUpstream, v.mcp, !h.cfg.WebhookDefaultMode, h.gatedCatalog(), mcpStdioUpstream, h.fakemcpBin, h.mcpStdioState,
		tools)
}

// calmStdioUpstream takes back a crash the stdio upstream was asked for and did not
// make, so that mcpStdioCrashes counts the crashes made.
func (h *harness) calmStdioUpstream() error {
	st, err := fakemcp.ReadState(h.mcpStdioState)
	if err != nil {
		return fmt.Errorf("read the stdio upstream's state: %w", err)
	}
	if err := fakemcp.WriteCrashNext(h.mcpStdioState, 0); err != nil {
		return fmt.Errorf("calm the stdio upstream: %w", err)
	}
	h.mcpStdioCrashes.Add(-int64(st.CrashNext))
	return nil
}

// crashLoop makes the stdio upstream crash after acting every few seconds while the
// chaos lasts: the next send_mail, whichever serve process's child gets it, records the
// mail and exits before answering.
func (h *harness) crashLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), 0xc2a5))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(2000+rng.IntN(2000)) * time.Millisecond):
		}
		if st, err := fakemcp.ReadState(h.mcpStdioState); err != nil || st.CrashNext > 0 {
			continue // the last crash is still to come
		}
		if err := fakemcp.WriteCrashNext(h.mcpStdioState, 1); err != nil {
			h.logger.Error("ask the stdio upstream to crash", slog.Any("error", err))
			continue
		}
		h.mcpStdioCrashes.Add(1)
	}
}

// baseEnv is the harness's environment without any oncebox or vendor setting.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "ONCEBOX_") || strings.HasPrefix(name, "STRIPE_") ||
			strings.HasPrefix(name, "SENDGRID_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// supervise restarts a serve process that exited without being killed, as
// an orchestrator would, and counts it.
func (h *harness) supervise(ctx context.Context) {
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, p := range h.procs {
			if !p.exitedByItself() {
				continue
			}
			h.selfExits.Add(1)
			h.logger.Warn("restarting a serve process that exited by itself", slog.String("proc", p.name), slog.String("log", p.logPath))
			if err := p.start(); err != nil {
				h.logger.Error("restart serve process", slog.String("proc", p.name), slog.Any("error", err))
			}
		}
	}
}

// killLoop SIGKILLs a random serve process every few seconds and restarts it
// a moment later.
func (h *harness) killLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), 0xc4a05))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(1500+rng.IntN(3000)) * time.Millisecond):
		}
		p := h.procs[rng.IntN(len(h.procs))]
		h.procMu.Lock()
		running := p.killable()
		if running {
			p.kill()
			h.kills.Add(1)
			h.logger.Info("killed", slog.String("proc", p.name))
		}
		h.procMu.Unlock()
		if !running {
			continue
		}
		select {
		case <-ctx.Done():
			return // ensureRunning brings it back after the chaos.
		case <-time.After(time.Duration(200+rng.IntN(1300)) * time.Millisecond):
		}
		h.procMu.Lock()
		if !p.running() {
			if err := p.start(); err != nil {
				h.logger.Error("restart killed process", slog.String("proc", p.name), slog.Any("error", err))
			}
		}
		h.procMu.Unlock()
	}
}

// Kills after an effect: at most maxEffectKills per run after a plain receiver's
// delivery, maxMCPEffectKills after the MCP upstream acted and maxMCPAnswerKills after
// it answered, each effectKillGap apart.
const (
	maxEffectKills    = 4
	maxMCPEffectKills = 1
	maxMCPAnswerKills = 2
	effectKillGap     = 5 * time.Second
)

// killAfterEffect is the plain receiver's effect hook: now and then, while the
// chaos lasts, it SIGKILLs every serve process after the receiver performed a
// delivery and before it answers, so that nobody hears the answer; then it
// starts them again. Only the reconciler, after the lookup lag, can settle
// such an op, with exactly one delivery.
func (h *harness) killAfterEffect(e fakewebhook.Effect) {
	h.killEveryProcess(&h.effectKills, &h.lastEffectKill, maxEffectKills, "a delivery, before its answer", e.OpID, e.ID)
}

// killAfterMCPEffect is the MCP upstream's effect hook: as killAfterEffect, after the
// upstream recorded a mail and before it answers. With native keys the worker that
// takes the op over resends it under the same key, which the upstream answers from
// that key; without, the reconciler settles it through the lookup tool.
func (h *harness) killAfterMCPEffect(m fakemcp.Mail) {
	h.killEveryProcess(&h.mcpEffectKills, &h.lastMCPKill, maxMCPEffectKills, "the MCP upstream acted, before its answer", m.Ref, m.ID)
}

// killAfterMCPAnswer is the MCP upstream's answer hook: as killAfterMCPEffect, once the
// upstream's answer is written and flushed, so that the serve process dies between the
// upstream's answer and the commit of the op's outcome.
func (h *harness) killAfterMCPAnswer(opID string) {
	h.killEveryProcess(&h.mcpAnswerKills, &h.lastMCPKill, maxMCPAnswerKills, "the MCP upstream answered, before the outcome was recorded", opID, "")
}

// killEveryProcess SIGKILLs every serve process while the chaos lasts, at most limit
// times and effectKillGap apart by kills and last, then starts them again.
func (h *harness) killEveryProcess(kills, last *atomic.Int64, limit int64, after, opID, effectID string) {
	if !h.chaosOn.Load() || kills.Load() >= limit {
		return
	}
	prev := last.Load()
	now := time.Now().UnixNano()
	if time.Duration(now-prev) < effectKillGap || !last.CompareAndSwap(prev, now) {
		return
	}
	h.procMu.Lock()
	defer h.procMu.Unlock()
	for _, p := range h.procs {
		if p.killable() {
			p.kill()
			h.kills.Add(1)
		}
	}
	kills.Add(1)
	h.logger.Info("killed every serve process after "+after, slog.String("op_id", opID),
		slog.String("effect", effectID))
	time.Sleep(300 * time.Millisecond)
	for _, p := range h.procs {
		if !p.running() {
			if err := p.start(); err != nil {
				h.logger.Error("restart killed process", slog.String("proc", p.name), slog.Any("error", err))
			}
		}
	}
}

// ensureRunning starts every process that is down and waits until all are
// healthy.
func (h *harness) ensureRunning(ctx context.Context) error {
	h.procMu.Lock()
	for _, p := range h.procs {
		if !p.running() {
			if p.exitedByItself() {
				h.selfExits.Add(1)
			}
			if err := p.start(); err != nil {
				h.procMu.Unlock()
				return err
			}
		}
	}
	h.procMu.Unlock()
	for _, p := range h.procs {
		if err := p.waitHealthy(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// newClient makes the run's API client (h.client), before the loops that call the API
// start.
func (h *harness) newClient() {
	bases := make([]string, len(h.procs))
	for i, p := range h.procs {
		bases[i] = p.base()
	}
	c := &client{
		http:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 5 * time.Second}},
		tokens:  make([]string, len(h.tenants)),
		bases:   bases,
		giveUp:  90 * time.Second,
		history: h.history,
	}
	c.approver = h.approver
	for i, t := range h.tenants {
		c.tokens[i] = t.token
	}
	h.client = c
}

// enqueue sends the whole workload, paced over EnqueueFor.
func (h *harness) enqueue(ctx context.Context) []outcome {
	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), 0x0b5))
	items := plan(rng, h.cfg.Ops, h.runID, h.cfg.WebhookDefaultMode, h.gatedOn(), h.compositeOn(), h.crmOn())
	if h.cfg.NoEvents {
		// Without events, a mail whose answer was lost while the Email Activity API
		// answered 403 cannot be looked up: needs_review is its expected end.
		for i := range items {
			if items[i].tool == protocol.ToolMail {
				items[i].plan.Blind = true
			}
		}
	}
	c := h.client
	picker := &refundPicker{f: h.fakes, used: map[string]bool{}}
	for i := range items {
		items[i].tenant = h.tenantOf(i, items[i].tool)
		items[i].account = h.tenants[items[i].tenant].account
	}
	outcomes := make([]outcome, len(items))
	sem := make(chan struct{}, 32)
	interval := h.cfg.EnqueueFor / time.Duration(len(items))
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, it := range items {
		if wait := time.Until(t0.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		select {
		case <-ctx.Done():
			outcomes[i] = outcome{key: it.key, tool: it.tool, plan: it.plan, err: ctx.Err()}
			continue
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			outcomes[i] = c.run(ctx, it, picker)
		})
		if i > 0 && i%500 == 0 {
			h.logger.Info("enqueueing", slog.Int("sent", i), slog.Int64("requests", c.requests.Load()),
				slog.Int64("retries", c.retries.Load()))
		}
	}
	wg.Wait()
	h.logger.Info("enqueued", slog.Int("keys", len(items)), slog.Int64("requests", c.requests.Load()),
		slog.Int64("retries", c.retries.Load()), slog.Duration("took", time.Since(t0)))
	return outcomes
}

// replayKeys is how many settled keys are sent again once every op settled.
const replayKeys = 400

// replaySettled sends a sample of the accepted keys again, each twice at once,
// with the payload first sent: every answer goes into the history, where the
// model requires a replay of the same op in its settled state and result.
func (h *harness) replaySettled(ctx context.Context, outcomes []outcome) {
	payloads := h.client.sentPayloads()
	var keys []string
	for _, o := range outcomes {
		if o.accepted && payloads[o.key] != nil {
			keys = append(keys, o.key)
		}
	}
	step := max(1, len(keys)/replayKeys)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := 0; i < len(keys); i += step {
		key := keys[i]
		for copy := range 2 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := h.client.postBody(ctx, i+copy, key, payloads[key]); err != nil {
					h.logger.Warn("replay after settling", slog.String("key", key), slog.Any("error", err))
				}
			})
		}
	}
	wg.Wait()
	h.logger.Info("replayed settled keys", slog.Int("keys", (len(keys)+step-1)/step))
}

// settle polls the database until every op of the tenants is settled or ctx
// ends, leaving a minute for the check. It reports whether all settled.
func (h *harness) settle(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	if ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
	}
	t0 := time.Now()
	lastLog := time.Time{}
	for {
		counts, err := h.statusCounts(ctx)
		if err == nil {
			open := 0
			for status, n := range counts {
				switch status {
				case statusSucceeded, statusFailed, statusNeedsReview, statusRejected, statusAwaiting:
					// awaiting_approval: a gated op left waiting (the verdict checks it).
				default:
					open += n
				}
			}
			if open == 0 {
				h.logger.Info("every op settled", slog.Any("statuses", counts), slog.Duration("took", time.Since(t0)))
				return true
			}
			if time.Since(t0) > 30*time.Second && h.stepsRunaway(ctx) {
				h.logger.Warn("gave up waiting: only the CRM's composite ops are open, and they redo their purged steps", slog.Int("open", open))
				return false
			}
			if time.Since(lastLog) > 5*time.Second {
				h.logger.Info("settling", slog.Int("open", open), slog.Any("statuses", counts))
				if time.Since(t0) > 20*time.Second {
					h.logOpenOps(ctx)
				}
				lastLog = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			h.logger.Warn("gave up waiting for ops to settle", slog.Any("error", ctx.Err()))
			return false
		case <-time.After(time.Second):
		}
	}
}

// logOpenOps logs a few of the ops that are not settled yet, so a slow tail
// can be understood.
func (h *harness) logOpenOps(ctx context.Context) {
	rows, err := h.pool.Query(ctx, qOpenOps, h.tenantIDs())
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, key, tool, status string
			attempts              int
			nextCheck             *time.Time
			updated               time.Time
		)
		if rows.Scan(&id, &key, &tool, &status, &attempts, &nextCheck, &updated) != nil {
			return
		}
		h.logger.Info("open op", slog.String("op_id", id), slog.String("key", key), slog.String("tool", tool),
			slog.String("status", status), slog.Int("attempts", attempts), slog.Any("next_check_at", nextCheck),
			slog.Time("updated_at", updated))
	}
}

func (h *harness) statusCounts(ctx context.Context) (map[string]int, error) {
	rows, err := h.pool.Query(ctx, qStatusCounts, h.tenantIDs())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, err
		}
		counts[status] = n
	}
	return counts, rows.Err()
}

// cleanup stops everything the run started and removes its files, keeping the
// logs when the run failed or --keep was given.
func (h *harness) cleanup() {
	for _, p := range h.procs {
		p.stop(5 * time.Second)
		p.closeLog()
	}
	if h.ns != nil {
		h.ns.close()
	}
	if h.fakes != nil {
		h.fakes.close()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	h.pgMu.Lock()
	if h.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := h.pg.Close(ctx); err != nil && !h.fo.done {
			h.logger.Warn("stop Postgres", slog.Any("error", err))
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.closeFailover(ctx)
	cancel()
	h.pgMu.Unlock()
	if h.tmp == "" {
		return
	}
	if h.broken || h.cfg.Keep {
		_ = os.RemoveAll(filepath.Join(h.tmp, "pgdata"))
		_ = os.RemoveAll(filepath.Join(h.tmp, "pgdata-standby"))
		_ = os.RemoveAll(filepath.Join(h.tmp, "bin"))
		fmt.Fprintln(h.cfg.Out, "chaos: logs kept in", h.logDir)
		return
	}
	_ = os.RemoveAll(h.tmp)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
