package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncebox/oncebox/devkit/fakemcp"
)

// The hostile answers (with the hostile upstream, gated.go): the HTTP upstream spells
// the Content-Type of its garbled answers oddly, in turn (hostileTypes: case,
// parameters, spacing, SSE), and every oversizeEvery the harness has a serve process
// call the upstream's read tool count_mail while the upstream answers it with
// oversizeBytes, streamed, under one of those spellings. The verdict: every oversized
// answer the call got through to is cut at max_result_bytes (the read fails alone,
// naming it), no session of the upstream ends on a hostile answer (sessions_broken),
// and no serve process's peak resident memory (VmHWM, read from /proc right after each
// oversized answer and every second) passes rssBound.

// hostileTypes are the Content-Type spellings of the hostile answers, which the SDK's
// client reads as JSON or SSE (mime.ParseMediaType).
var hostileTypes = []string{"Application/JSON", "text/event-stream", "application/json ; charset=UTF-8", "Text/Event-Stream;charset=utf-8"}

const (
	// oversizeEvery is how often an oversized answer is asked for; oversizeBytes its
	// size.
	oversizeEvery = 3 * time.Second
	oversizeBytes = 300 << 20
	// rssBound is the most resident memory a serve process may ever hold: an oversized
	// answer read whole would take more than oversizeBytes.
	rssBound = 256 << 20
	// toolCount is the upstream's read tool the oversized answers are for.
	toolCount = mcpUpstream + ".count_mail"
)

// hostileAnswers are the oversized answers' figures of a run.
type hostileAnswers struct {
	// asked counts the oversized answers asked for whose call got an answer; cut, those
	// cut at max_result_bytes.
	asked, cut atomic.Int64
	// peakRSS is the highest VmHWM seen of a serve process, in bytes.
	peakRSS atomic.Int64
	mu      sync.Mutex
	// leaked are the answers of the calls whose oversized answer was not cut.
	leaked []string
}

// oversizeLoop asks for an oversized answer every oversizeEvery, each through the next
// serve process that is up, and reads that process's peak memory right after.
func (h *harness) oversizeLoop(ctx context.Context) {
	if !h.gatedOn() {
		return
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(oversizeEvery):
		}
		p := h.procs[i%len(h.procs)]
		if !p.running() {
			continue
		}
		h.fakes.mcp.AnswerNext("count_mail", fakemcp.Answer{ContentType: hostileTypes[i%len(hostileTypes)], Size: oversizeBytes})
		status, body, err := h.readCount(ctx, p.base())
		h.sampleRSS(p)
		if err != nil || status == http.StatusServiceUnavailable {
			continue // the process went down, or its store: the answer waits for the next call
		}
		h.hostile.asked.Add(1)
		if status == http.StatusBadGateway && strings.Contains(body, "max_result_bytes") {
			h.hostile.cut.Add(1)
			continue
		}
		if status == http.StatusOK {
			h.hostile.mu.Lock()
			h.hostile.leaked = append(h.hostile.leaked, fmt.Sprintf("%s: HTTP %d, %d bytes", p.name, status, len(body)))
			h.hostile.mu.Unlock()
		}
	}
}

// readCount calls count_mail through the serve process at base, as the first tenant.
func (h *harness) readCount(ctx context.Context, base string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/ops", strings.NewReader(`{"tool":"`+toolCount+`","args":{}}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+h.tenants[0].token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), err
}

// rssLoop reads every serve process's peak memory every second.
func (h *harness) rssLoop(ctx context.Context) {
	for {
		for _, p := range h.procs {
			h.sampleRSS(p)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// sampleRSS notes the peak resident memory of p, if it is up.
func (h *harness) sampleRSS(p *serveProc) {
	p.mu.Lock()
	pid := 0
	if p.cmd != nil && !isDone(p.done) {
		pid = p.cmd.Process.Pid
	}
	p.mu.Unlock()
	if pid == 0 {
		return
	}
	if hwm := vmHWM(pid); hwm > h.hostile.peakRSS.Load() {
		h.hostile.peakRSS.Store(hwm)
	}
}

// vmHWM is the peak resident memory of process pid, in bytes (0 when unknown).
func vmHWM(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// hostileInput fills what the verdict needs of the hostile answers, and returns the
// harness errors of a run that did not prove them.
func (h *harness) hostileInput(in *CheckInput) []string {
	if !h.gatedOn() {
		return nil
	}
	in.PeakRSS, in.RSSBound = h.hostile.peakRSS.Load(), rssBound
	h.hostile.mu.Lock()
	in.Uncut = append([]string(nil), h.hostile.leaked...)
	h.hostile.mu.Unlock()
	if h.hostile.cut.Load() == 0 {
		return []string{"no oversized answer was cut at max_result_bytes: the oversized answers went unproven"}
	}
	return nil
}

// hostileFigures are the hostile answers' figures of a run.
func (h *harness) hostileFigures() string {
	return fmt.Sprintf("oversized=%d oversized_cut=%d serve_peak_rss_mib=%d rss_bound_mib=%d",
		h.hostile.asked.Load(), h.hostile.cut.Load(), h.hostile.peakRSS.Load()>>20, rssBound>>20)
}
