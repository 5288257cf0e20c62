package audit

import (
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Formats are the export formats: one JSON object per line, or CSV with a header.
var Formats = []string{"jsonl", "csv"}

// Writer writes entries in an export format. Call Flush at the end.
type Writer interface {
	Write(e *Entry) error
	Flush() error
}

// ContentType returns the media type of format ("" for an unknown one).
func ContentType(format string) string {
	switch format {
	case "jsonl":
		return "application/jsonl"
	case "csv":
		return "text/csv; charset=utf-8"
	}
	return ""
}

// NewWriter returns a Writer of format (one of Formats) on w.
func NewWriter(w io.Writer, format string) (Writer, error) {
	switch format {
	case "jsonl":
		return &jsonlWriter{enc: json.NewEncoder(w)}, nil
	case "csv":
		return &csvWriter{c: csv.NewWriter(w)}, nil
	}
	return nil, fmt.Errorf("audit: unknown format %q: want jsonl or csv", format)
}

type jsonlWriter struct{ enc *json.Encoder }

func (j *jsonlWriter) Write(e *Entry) error { return j.enc.Encode(e) }
func (j *jsonlWriter) Flush() error         { return nil }

// csvHeader names the CSV columns; the fingerprint is base64, the hashes hex, the
// entry's fields JSON.
var csvHeader = []string{"seq", "tx", "at", "kind", "op_id", "fingerprint", "entry", "prev_hash", "hash"}

type csvWriter struct {
	c      *csv.Writer
	headed bool
}

func (c *csvWriter) Write(e *Entry) error {
	if !c.headed {
		c.headed = true
		if err := c.c.Write(csvHeader); err != nil {
			return err
		}
	}
	return c.c.Write([]string{strconv.FormatInt(e.Seq, 10), strconv.FormatUint(e.Tx, 10), e.At.UTC().Format(time.RFC3339Nano),
		e.Kind, e.OpID, base64.StdEncoding.EncodeToString(e.Fingerprint), string(e.Fields), hex.EncodeToString(e.PrevHash), hex.EncodeToString(e.Hash)})
}

func (c *csvWriter) Flush() error {
	if !c.headed {
		c.headed = true
		if err := c.c.Write(csvHeader); err != nil {
			return err
		}
	}
	c.c.Flush()
	return c.c.Error()
}
