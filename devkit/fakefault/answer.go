package fakefault

import (
	"net/http"
	"strconv"
	"time"
)

// DropConnection closes the client's connection without an answer. Where the
// connection cannot be taken over (HTTP/2, a recorder) it aborts the handler,
// which resets the stream.
func DropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// RetryAfter returns the Retry-After header value for d: whole seconds,
// rounded up, 1 when d is not positive.
func RetryAfter(d time.Duration) string {
	if d <= 0 {
		d = time.Second
	}
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
