package vendorevents

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncebox/oncebox/protocol"
)

// maxFieldLen bounds every text field of a stored event (ids, types, statuses); the
// vendors' own are far shorter (Stripe ids stay under 255 characters).
const maxFieldLen = 255

// earliestEvent is the oldest time an event or object may carry: neither vendor sent
// events before it, and a time before it is a forged or broken one.
var earliestEvent = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// checkEvent says why e cannot be stored as it is ("" when it can): a tag that is not
// an op id, an empty id, a text field with NUL, invalid UTF-8 or more than
// maxFieldLen bytes, a time before 2000 or more than future after now, or a summary
// holding a NUL (jsonb refuses \u0000). It runs before the store, so that one bad
// event is counted as invalid instead of failing its whole batch.
func checkEvent(e Event, now time.Time, future time.Duration) string {
	if !protocol.IsOpID(e.OpTag) {
		return fmt.Sprintf("the oncebox_op tag (%d bytes) is not an op id", len(e.OpTag))
	}
	for _, f := range []struct{ name, v string }{{"event id", e.EventID}, {"event type", e.Type},
		{"object type", e.ObjectType}, {"object id", e.ObjectID}, {"status", e.Status}, {"currency", e.Currency}} {
		switch {
		case f.v == "" && f.name != "currency":
			return "the " + f.name + " is empty"
		case len(f.v) > maxFieldLen:
			return fmt.Sprintf("the %s is %d bytes long, more than %d", f.name, len(f.v), maxFieldLen)
		case strings.ContainsRune(f.v, 0):
			return "the " + f.name + " holds a NUL character"
		case !utf8.ValidString(f.v):
			return "the " + f.name + " is not valid UTF-8"
		}
	}
	latest := now.Add(future)
	if e.OccurredAt.Before(earliestEvent) || e.OccurredAt.After(latest) {
		return fmt.Sprintf("the event's time %s is before 2000 or more than %s in the future", e.OccurredAt.Format(time.RFC3339), future)
	}
	if !e.ObjectCreated.IsZero() && (e.ObjectCreated.Before(earliestEvent) || e.ObjectCreated.After(latest)) {
		return fmt.Sprintf("the object's creation time %s is before 2000 or more than %s in the future", e.ObjectCreated.Format(time.RFC3339), future)
	}
	if len(e.Summary) > 0 {
		if err := checkJSONText(e.Summary); err != nil {
			return "the object's summary " + err.Error()
		}
	}
	return ""
}

// checkJSONText reports a JSON document that Postgres's jsonb cannot hold: one with a
// NUL in a key or a string.
func checkJSONText(doc json.RawMessage) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return errors.New("is not JSON")
	}
	var walk func(any) error
	walk = func(v any) error {
		switch t := v.(type) {
		case string:
			if strings.ContainsRune(t, 0) {
				return errors.New("holds a NUL character")
			}
		case []any:
			for _, x := range t {
				if err := walk(x); err != nil {
					return err
				}
			}
		case map[string]any:
			for k, x := range t {
				if err := walk(k); err != nil {
					return err
				}
				if err := walk(x); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v)
}
