package audit

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"time"
)

const (
	// httpFlushEvery is how many entries an HTTP export writes between two flushes.
	httpFlushEvery = 256
	// httpChunkWindow is how long the next chunk of an HTTP export may take once one
	// was sent: an export that progresses outlives the server's write timeout, one
	// whose client stopped reading does not.
	httpChunkWindow = time.Minute
)

// ExportHTTP streams the entries p selects to an HTTP response, in format (one of
// Formats), for every door that serves an export (GET /v1/audit, the console's
// downloads). The caller sets the headers first. Entries are buffered and pushed to the
// client every 256 of them, each push giving the next chunk a minute of write deadline;
// an export without entries sends its status and headers alone.
//
// started reports whether a byte of the body reached w. A failure before it can still
// be answered as any other; after it, no problem document can follow the entries, so
// the caller must cut the connection (panic(http.ErrAbortHandler)) rather than let a
// truncated export look whole.
func ExportHTTP(ctx context.Context, w http.ResponseWriter, q Querier, p ExportParams, format string) (started bool, err error) {
	st := &httpStream{w: w, rc: http.NewResponseController(w)}
	st.buf = bufio.NewWriterSize(st, 32<<10)
	out, err := NewWriter(st.buf, format)
	if err != nil {
		return false, err
	}
	n := 0
	err = Export(ctx, q, p, func(e *Entry) error {
		if err := out.Write(e); err != nil {
			return err
		}
		if n++; n%httpFlushEvery != 0 {
			return nil
		}
		if err := out.Flush(); err != nil {
			return err
		}
		return st.flush()
	})
	if err == nil {
		if err = out.Flush(); err == nil {
			err = st.flush()
		}
	}
	return st.started, err
}

// httpStream writes an export's bytes to the response, sending its status and headers
// with the first of them, and pushes them to the client on flush.
type httpStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf *bufio.Writer
	// started is set once a byte went to the response.
	started bool
}

// Write implements io.Writer for buf.
func (s *httpStream) Write(b []byte) (int, error) {
	s.started = true
	return s.w.Write(b)
}

// flush sends what is buffered to the client and gives the next chunk httpChunkWindow.
// A writer that cannot flush is written to as it is.
func (s *httpStream) flush() error {
	if err := s.buf.Flush(); err != nil {
		return err
	}
	if !s.started {
		// An empty export: the status and headers alone.
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(httpChunkWindow))
	return nil
}
