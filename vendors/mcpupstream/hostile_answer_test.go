package mcpupstream_test

import (
	"bufio"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/vendors/mcpupstream"
)

// hugeAnswerEnv, set, makes TestHugeAnswerIsCut the child that runs the scenario
// under the Content-Type it names.
const hugeAnswerEnv = "ONCEBOX_TEST_HUGE_ANSWER_TYPE"

// hugeAnswer is the size of the hostile answer: 300 MB, streamed by the fake.
const hugeAnswer = 300 << 20

// peakBound is the most memory the child process may ever hold (its VmHWM, peak
// resident set): a test binary, a fake upstream and a session, with the answer read to
// max_result_bytes (1 MiB) at most. Reading the answer whole takes more than
// hugeAnswer.
const peakBound = 100 << 20

// TestHugeAnswerIsCut: an upstream answers a call with 300 MB under a Content-Type
// spelled as the SDK's client still reads it (Application/JSON with a parameter, and
// Text/Event-Stream). Each runs in a child process whose peak resident memory
// (VmHWM) must stay under peakBound: the answer is cut at max_result_bytes before the
// client reads it, the call fails saying so, and the next call on the same session
// (no restart) succeeds.
func TestHugeAnswerIsCut(t *testing.T) {
	if ct := os.Getenv(hugeAnswerEnv); ct != "" {
		hugeAnswerChild(t, ct)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the child's peak memory from /proc")
	}
	t.Parallel()
	for _, ct := range []string{"Application/JSON; charset=UTF-8", "Text/Event-Stream"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHugeAnswerIsCut$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), hugeAnswerEnv+"="+ct)
		out, runErr := cmd.CombinedOutput()
		peak := -1
		for line := range strings.Lines(string(out)) {
			if _, v, ok := strings.Cut(strings.TrimSpace(line), "peak_bytes="); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				peak = n
			}
		}
		require.Positive(t, peak, "the child printed no peak:\n%s", out)
		t.Logf("%s: peak resident memory %d MiB (bound %d MiB)", ct, peak>>20, peakBound>>20)
		require.Less(t, peak, peakBound, "%s: the child's peak resident memory", ct)
		require.NoError(t, runErr, "%s:\n%s", ct, out)
	}
}

// hugeAnswerChild runs the scenario under Content-Type ct and prints its peak memory.
func hugeAnswerChild(t *testing.T, ct string) {
	fake := fakemcp.New()
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	defer func() { t.Logf("peak_bytes=%d", vmHWM(t)) }() // printed however the scenario ends
	obs := &restarts{}
	u := mcpupstream.New(mcpupstream.Config{Name: "mail", URL: srv.URL, Timeout: 10 * time.Second, Observer: obs})
	defer u.Close()
	ctx := context.Background()
	_, err := u.Read(ctx, "count_mail", map[string]any{})
	require.NoError(t, err, "the session opens")

	fake.AnswerNext("count_mail", fakemcp.Answer{ContentType: ct, Size: hugeAnswer})
	_, err = u.Read(ctx, "count_mail", map[string]any{})
	require.ErrorContains(t, err, "larger than max_result_bytes (1048576 bytes)")
	res, err := u.Read(ctx, "count_mail", map[string]any{})
	require.NoError(t, err, "the next call on the session")
	require.False(t, res.IsError)
	require.Equal(t, 1, fake.Answered())
	require.Zero(t, u.Health().Restarts, "the session was never opened again")
	require.Zero(t, obs.n.Load())
}

// vmHWM is this process's peak resident memory, in bytes.
func vmHWM(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// restarts counts the sessions opened again (Observer.UpstreamRestarted).
type restarts struct{ n atomic.Int64 }

func (*restarts) UpstreamCalled(string, string, string, time.Duration) {}
func (*restarts) UpstreamConnected(string, bool)                       {}
func (r *restarts) UpstreamRestarted(string)                           { r.n.Add(1) }
func (*restarts) UpstreamRateLimited(string)                           {}
