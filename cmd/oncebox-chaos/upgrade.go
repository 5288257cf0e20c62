package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncebox/oncebox/internal/fleet"
)

// The fleet's log lines (internal/fleet) that show the mixed-version switch turning on
// and off in a process of this tree.
const (
	fleetMixedOn  = "fleet: a process of an older release is live"
	fleetMixedOff = "fleet: every live process speaks this protocol"
)

// upgrade is the state of a mixed-version run (Config.UpgradeFrom).
type upgrade struct {
	// prevBin is the previous release's oncebox.
	prevBin string
	// migrated is when this tree's oncebox migrate ran (unix nanoseconds, 0: not yet).
	migrated atomic.Int64
	// mixed says the previous release speaks an older protocol than this tree
	// (oldProtocol), so this tree's processes must turn the mixed-version switch on
	// while it serves; between releases of one protocol nothing switches.
	mixed atomic.Bool
	// replaced counts the processes replaced by this tree's binary.
	replaced atomic.Int64
	// held says that the mid-run migrate held a contract migration of this tree (exit
	// status 3: the previous release's processes were live), and contracted is when the
	// migrate run after the last replacement applied it (unix nanoseconds, 0: not yet).
	held       atomic.Bool
	contracted atomic.Int64
}

// buildPrevious builds the previous release's oncebox from its commit: the commit's
// tree (git archive) into a folder of its own, then go build there.
func (h *harness) buildPrevious(ctx context.Context, root string) error {
	src := filepath.Join(h.tmp, "prev-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, h.cfg.UpgradeFrom, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("git archive %s: %w\n%s", h.cfg.UpgradeFrom, err, out)
	}
	h.up.prevBin = filepath.Join(h.tmp, "bin-prev", "oncebox")
	build := exec.CommandContext(ctx, "go", "build", "-o", h.up.prevBin, "./cmd/oncebox")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build the previous release (%s): %w\n%s", h.cfg.UpgradeFrom, err, out)
	}
	_ = os.RemoveAll(src)
	h.logger.Info("previous release built", slog.String("commit", h.cfg.UpgradeFrom), slog.String("bin", h.up.prevBin))
	return nil
}

// upgradeLoop is the rolling upgrade during the chaos: this tree's oncebox migrate at a
// quarter of the enqueueing, while only the previous release serves, then the processes
// replaced by this tree's binary one by one (SIGTERM, start), spread over the next third
// of it. A contract migration of this tree is held by that first migrate (the previous
// release serves: exit status 3, the migrations before it applied), and applied by
// `oncebox migrate --wait` once the last process is replaced, as an operator would:
// binaries first, then the contract, under the same chaos. Kills and faults go on throughout. A process is replaced only once the one
// replaced before it has seen the previous release still serving (the verdict's
// mixed-version switch; at most 15 s). An upgrade is never left half done: if the chaos
// ends first (the kill loops holding the processes, or a slow migration, ate the
// schedule), the rest is replaced without the gaps, under run.
func (h *harness) upgradeLoop(chaos, run context.Context) error {
	// wait waits d, or less if the chaos ends; false only when the run itself ends.
	wait := func(d time.Duration) bool {
		select {
		case <-run.Done():
			return false
		case <-chaos.Done():
			return true
		case <-time.After(d):
			return true
		}
	}
	if !wait(h.cfg.EnqueueFor / 4) {
		return nil
	}
	if err := h.migrateMidRun(run); err != nil {
		return err
	}
	h.up.migrated.Store(time.Now().UnixNano())
	old := h.oldProtocol(run)
	h.up.mixed.Store(old < fleet.Protocol)
	h.logger.Info("migrated with this tree's oncebox while the previous release serves",
		slog.Int("old_protocol", old), slog.Int("protocol", fleet.Protocol), slog.Bool("mixed_switch_expected", h.up.mixed.Load()))
	gap := h.cfg.EnqueueFor / 3 / time.Duration(len(h.procs))
	sawOn := make(chan struct{})
	close(sawOn)
	for i, p := range h.procs {
		if !wait(gap) {
			return nil
		}
		select {
		case <-run.Done():
			return nil
		case <-sawOn:
		}
		h.procMu.Lock()
		p.stop(5 * time.Second)
		p.setBin(h.bin)
		err := p.start()
		if err == nil && i < len(h.procs)-1 && h.up.mixed.Load() {
			p.spare()
		}
		h.procMu.Unlock()
		if err != nil {
			return fmt.Errorf("start %s on this tree's binary: %w", p.name, err)
		}
		h.up.replaced.Add(1)
		h.logger.Info("replaced by this tree's binary", slog.String("proc", p.name))
		if i < len(h.procs)-1 && h.up.mixed.Load() {
			seen := make(chan struct{})
			sawOn = seen
			go func() {
				defer close(seen)
				h.spareUntilSwitchOn(run, p)
			}()
		}
	}
	if !h.up.held.Load() {
		return nil
	}
	if err := h.migrateContract(run); err != nil {
		return err
	}
	h.up.contracted.Store(time.Now().UnixNano())
	h.logger.Info("contract migration applied once every process runs this tree's binary")
	return nil
}

// migrateContract runs this tree's oncebox migrate --wait after the last replacement:
// it waits out the previous release's processes that are still live in the registry (a
// SIGKILLed one for its lease) and applies the held contract migration, each try for at
// most 2 minutes; failed tries are run again as in migrateMidRun.
func (h *harness) migrateContract(ctx context.Context) error {
	return h.migrateTries(ctx, "after the last replacement", 2*time.Minute, false, "--wait")
}

// oldProtocol is the protocol the previous release's processes speak, read after this
// tree's migration and before any process is replaced, when only they serve: the lowest
// one registered, or, when none registered (v0.1.0 never does), v0.1.0's.
func (h *harness) oldProtocol(ctx context.Context) int {
	var p *int
	if err := h.pool.QueryRow(ctx, "SELECT min(protocol) FROM oncebox_process WHERE NOT stopped").Scan(&p); err != nil || p == nil {
		return fleet.ProtocolCleanRuns
	}
	return *p
}

// spareUntilSwitchOn keeps the kill loops off a process just replaced while a process
// of the previous release still serves, until its log shows the switch on (at most
// 15 s): the verdict wants every process of this tree to have seen the switch on, and
// the kills, with a Postgres crash among them, could otherwise fill that whole window.
// The caller has spared p; this unspares it.
func (h *harness) spareUntilSwitchOn(ctx context.Context, p *serveProc) {
	defer p.unspare()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if logHas(p.logPath, fleetMixedOn) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	h.logger.Info("a replaced process has not seen the switch on within 15 s; it may be killed again", slog.String("proc", p.name))
}

// logHas reports whether the log at path holds a line containing s.
func logHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// migrateHeld is oncebox migrate's exit status when it held a contract migration.
const migrateHeld = 3

// migrateMidRun runs this tree's oncebox migrate as an operator would (a held contract
// migration is not a failure: upgrade.held), in the middle of the run (migrateTries).
func (h *harness) migrateMidRun(ctx context.Context) error {
	return h.migrateTries(ctx, "in the middle of the run", 0, true)
}

// migrateTries runs this tree's oncebox migrate with flags, each try for at most limit
// (0: no limit of its own): the chaos may restart or crash Postgres under it (a
// migration's connection then ends with 57P01), and each migration is one transaction,
// so a failed run is run again, a few times. A migration that fails for any other reason
// fails every time, and the run with it. With held, exit status 3 (a contract migration
// held) ends it without error and sets upgrade.held; without, it is a failed try (with
// --wait: the try's limit ran out while older processes held it). when says when it
// runs, for its messages.
func (h *harness) migrateTries(ctx context.Context, when string, limit time.Duration, held bool, flags ...string) error {
	const tries = 5
	args := append(append([]string{"migrate"}, flags...), "--database-url", h.dbURL)
	name := strings.Join(append([]string{"oncebox migrate"}, flags...), " ")
	for try := 1; ; try++ {
		tryCtx, cancel := ctx, context.CancelFunc(func() {})
		if limit > 0 {
			tryCtx, cancel = context.WithTimeout(ctx, limit)
		}
		out, err := h.oncebox(tryCtx, args...)
		cancel()
		if err == nil {
			return nil
		}
		if exit := (*exec.ExitError)(nil); held && errors.As(err, &exit) && exit.ExitCode() == migrateHeld {
			h.up.held.Store(true)
			h.logger.Info("this tree's contract migration is held while the previous release serves",
				slog.String("output", strings.TrimSpace(string(out))))
			return nil
		}
		if try == tries || ctx.Err() != nil {
			return fmt.Errorf("this tree's %s, %s (%d tries): %w\n%s", name, when, try, err, out)
		}
		h.logger.Info("this tree's "+name+" failed; running it again", slog.String("when", when), slog.Int("try", try),
			slog.String("output", strings.TrimSpace(string(out))))
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// switchSeen counts the processes replaced while a previous-release process still
// served (every one but the last) whose log shows the fleet's switch on, and the
// processes whose last fleet line says the switch is off. The last one replaced starts
// when only the previous release's recent jobs may still be seen, so it may start with
// the switch on or off; either way it must end off, as every process must.
func (h *harness) switchSeen() (on, off int) {
	for i, p := range h.procs {
		f, err := os.Open(p.logPath)
		if err != nil {
			continue
		}
		var sawOn, endsOff bool
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.Contains(line, fleetMixedOn):
				sawOn, endsOff = true, false
			case strings.Contains(line, fleetMixedOff):
				endsOff = true
			}
		}
		_ = f.Close()
		if sawOn && i < len(h.procs)-1 {
			on++
		}
		if endsOff {
			off++
		}
	}
	return on, off
}

// waitSwitchedOff waits, up to limit, until every process logged the switch off
// (the last previous-release process gone), and returns the counts.
func (h *harness) waitSwitchedOff(ctx context.Context, limit time.Duration) (on, off int) {
	deadline := time.Now().Add(limit)
	for {
		on, off = h.switchSeen()
		if off >= len(h.procs) || time.Now().After(deadline) || ctx.Err() != nil {
			return on, off
		}
		time.Sleep(time.Second)
	}
}
