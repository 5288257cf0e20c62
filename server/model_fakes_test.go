package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// lossyFront stands in front of a fake target and loses the answer of the first POST
// carrying a given ref: "after" lets the target act, then cuts the connection; "before"
// cuts it before the target sees anything. Either way the op's outcome is unknown. Or,
// "slow", it passes the POST on after modelSlowAnswer.
type lossyFront struct {
	next http.Handler
	mu   sync.Mutex
	drop map[string]string // ref -> "before" or "after"
}

// lose makes the first POST whose body's ref is ref lose its answer, how: "before" or
// "after" the target acts; or "slow" delays it.
func (f *lossyFront) lose(ref, how string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop[ref] = how
}

func (f *lossyFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.mu.Lock()
	how, ok := f.drop[bodyRef(body)]
	delete(f.drop, bodyRef(body))
	f.mu.Unlock()
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	if how == "slow" {
		time.Sleep(modelSlowAnswer)
		f.next.ServeHTTP(w, r)
		return
	}
	if how == "after" {
		f.next.ServeHTTP(httptest.NewRecorder(), r)
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// modelSlowAnswer is how long a "slow" POST waits: past a move's drain, within its wait.
const modelSlowAnswer = 1500 * time.Millisecond

// bodyRef returns the "ref" of a JSON body, the model's name for the call it came from.
func bodyRef(body []byte) string {
	var b struct {
		Ref string `json:"ref"`
	}
	_ = json.Unmarshal(body, &b)
	return b.Ref
}

// effectsByRef groups a fake target's effects by path and the ref of their body.
func effectsByRef(fake *fakewebhook.Server) map[[2]string][]fakewebhook.Effect {
	out := map[[2]string][]fakewebhook.Effect{}
	for _, e := range fake.Effects() {
		k := [2]string{e.Path, bodyRef(e.Body)}
		out[k] = append(out[k], e)
	}
	return out
}
