package sendgrid

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/rest"
	sg "github.com/sendgrid/sendgrid-go"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

const (
	// activityPath is the Email Activity search endpoint; activityPath + "/{msg_id}"
	// is one message's details.
	activityPath = "/v3/messages"
	// lookupLimit is the rows a Lookup asks for when the op's email has few recipients.
	lookupLimit = 100
	// maxActivityLimit is the most rows the activity API answers at once.
	maxActivityLimit = 1000
	// acceptedStatus is the status of a send SendGrid queued, stored in every result.
	acceptedStatus = http.StatusAccepted
)

// activityRow is one row of GET /v3/messages: one recipient of one message.
type activityRow struct {
	MsgID         string `json:"msg_id"`
	Status        string `json:"status"`
	LastEventTime string `json:"last_event_time"`
}

// activityDetail is the part of GET /v3/messages/{msg_id} that oncebox reads.
type activityDetail struct {
	MsgID      string         `json:"msg_id"`
	UniqueArgs map[string]any `json:"unique_args"`
}

// Lookup finds the emails tagged with the op's id through the Email Activity API
// (GET /v3/messages, query unique_args['oncebox_op']="<op id>"), waiting for the
// Vendor's activity rate limiter first. It returns one object per X-Message-Id,
// however many recipients the email had. A message younger than LookupLag may be
// missing. When the add-on is missing (HTTP 403) the error wraps
// vendorapi.ErrLookupUnavailable; a rate limit (HTTP 429) or any other failure is a
// plain error to try again later. params.Since is not used: the activity API
// only keeps recent messages anyway.
func (v *Vendor) Lookup(ctx context.Context, params vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	if !queryable(params.OpID) {
		return nil, fmt.Errorf("sendgrid: lookup: op id %q cannot be put in an activity query", params.OpID)
	}
	limit := rowLimit(params.Args)
	query := fmt.Sprintf(`unique_args['%s']="%s"`, vendorapi.TagKey, params.OpID)
	rows, err := v.search(ctx, v.key(params.Account), query, limit)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: lookup op %s: %w", params.OpID, err)
	}
	objs := groupRows(rows)
	if len(rows) == limit && len(objs) < 2 {
		// One message filled the page: another one tagged alike may be cut off.
		return nil, fmt.Errorf("sendgrid: lookup op %s: %d activity rows of one message fill the page, so a second message may be hidden: %w",
			params.OpID, len(rows), vendorapi.ErrLookupUnavailable)
	}
	for i := range objs {
		objs[i].OpID = params.OpID
	}
	v.cfg.Logger.Debug("sendgrid: lookup", append(tracing.SpanLogAttrs(ctx), slog.String("op_id", params.OpID), slog.Int("rows", len(rows)),
		slog.Int("objects", len(objs)))...)
	return &vendorapi.LookupResult{Objects: objs}, nil
}

// ListMessages lists the messages whose last_event_time lies between since and
// until (both inclusive, to the second), for the finance report: one object per
// X-Message-Id, its OpID read from the message's details (unique_args; empty for
// a message oncebox did not tag) and Created its last_event_time. Every request
// waits for the Vendor's activity rate limiter, so a long list takes minutes at
// SendGrid's 6 requests a minute. A window holding more rows than one answer
// carries is split in halves until each half fits. It lists the messages of the key
// of the account ctx carries (vendorapi.WithAccount): the installation's by default.
func (v *Vendor) ListMessages(ctx context.Context, since, until time.Time) ([]vendorapi.VendorObject, error) {
	key := v.key(vendorapi.AccountFrom(ctx))
	since, until = since.UTC().Truncate(time.Second), until.UTC().Truncate(time.Second)
	if until.Before(since) {
		return nil, fmt.Errorf("sendgrid: list messages: until %s is before since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	rows, err := v.listWindow(ctx, key, since, until)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: list messages: %w", err)
	}
	// One full msg_id per message, to ask for its details.
	rowIDs := make(map[string]string)
	for _, r := range rows {
		if id := messageID(r.MsgID); id != "" && rowIDs[id] == "" {
			rowIDs[id] = r.MsgID
		}
	}
	objs := groupRows(rows)
	for i := range objs {
		d, err := v.detail(ctx, key, rowIDs[objs[i].ID])
		if err != nil {
			return nil, fmt.Errorf("sendgrid: list messages: details of %s: %w", objs[i].ID, err)
		}
		if op, ok := d.UniqueArgs[vendorapi.TagKey].(string); ok {
			objs[i].OpID = op
		}
	}
	return objs, nil
}

// listWindow returns every activity row in [from, until], splitting the window
// when one answer is full.
func (v *Vendor) listWindow(ctx context.Context, key string, from, until time.Time) ([]activityRow, error) {
	query := fmt.Sprintf(`last_event_time BETWEEN TIMESTAMP "%s" AND TIMESTAMP "%s"`, from.Format(time.RFC3339), until.Format(time.RFC3339))
	rows, err := v.search(ctx, key, query, maxActivityLimit)
	if err != nil || len(rows) < maxActivityLimit {
		return rows, err
	}
	if !until.After(from) {
		return nil, fmt.Errorf("more than %d activity rows at %s: they cannot all be listed", maxActivityLimit-1, from.Format(time.RFC3339))
	}
	mid := from.Add(until.Sub(from) / 2).Truncate(time.Second)
	left, err := v.listWindow(ctx, key, from, mid)
	if err != nil {
		return nil, err
	}
	right, err := v.listWindow(ctx, key, mid.Add(time.Second), until)
	if err != nil {
		return nil, err
	}
	return append(left, right...), nil
}

// search runs one Email Activity query with key.
func (v *Vendor) search(ctx context.Context, key, query string, limit int) ([]activityRow, error) {
	// The raw query: the SDK encodes it.
	body, err := v.activityGet(ctx, key, activityPath, map[string]string{"limit": strconv.Itoa(limit), "query": query})
	if err != nil {
		return nil, err
	}
	var page struct {
		Messages []activityRow `json:"messages"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("decode activity search: %w", err)
	}
	return page.Messages, nil
}

// detail fetches one activity row's details.
func (v *Vendor) detail(ctx context.Context, key, msgID string) (*activityDetail, error) {
	body, err := v.activityGet(ctx, key, activityPath+"/"+url.PathEscape(msgID), nil)
	if err != nil {
		return nil, err
	}
	var d activityDetail
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("decode activity details: %w", err)
	}
	return &d, nil
}

// activityGet makes one Email Activity request once the rate limiter allows it
// and returns the body of a 200. key is the installation's or a subuser's own key (a
// subuser's messages are its own key's to read).
func (v *Vendor) activityGet(ctx context.Context, key, path string, query map[string]string) ([]byte, error) {
	if err := v.activity.Wait(ctx); err != nil {
		return nil, fmt.Errorf("wait for the Email Activity rate limiter: %w", err)
	}
	req := sg.GetRequest(key, path, v.cfg.BaseURL)
	req.Method = rest.Get
	req.QueryParams = query
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	resp, err := v.client.SendWithContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, v.hideKey(v.hideKey(err, v.cfg.APIKey), key))
	}
	v.cfg.Logger.Debug("sendgrid: activity request", slog.String("path", path), slog.Int("status", resp.StatusCode))
	switch resp.StatusCode {
	case http.StatusOK:
		return []byte(resp.Body), nil
	case http.StatusForbidden:
		return nil, fmt.Errorf("GET %s: HTTP 403 (the Email Activity add-on is missing or the key lacks its scope): %w",
			path, vendorapi.ErrLookupUnavailable)
	case http.StatusTooManyRequests:
		wait := retryAfter(http.Header(resp.Headers), time.Now())
		return nil, fmt.Errorf("GET %s: the Email Activity API is rate limiting (HTTP 429); try again in %s", path, wait)
	default:
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode,
			strings.ReplaceAll(v.hideKeyString(cut(resp.Body, 512)), key, redacted))
	}
}

// groupRows turns activity rows into one object per X-Message-Id, the earliest
// last_event_time as Created, ordered by Created then ID.
func groupRows(rows []activityRow) []vendorapi.VendorObject {
	at := make(map[string]int)
	var objs []vendorapi.VendorObject
	for _, r := range rows {
		id := messageID(r.MsgID)
		if id == "" {
			continue
		}
		created, _ := time.Parse(time.RFC3339, r.LastEventTime)
		if i, seen := at[id]; seen {
			if !created.IsZero() && (objs[i].Created.IsZero() || created.Before(objs[i].Created)) {
				objs[i].Created = created
			}
			continue
		}
		at[id] = len(objs)
		objs = append(objs, vendorapi.VendorObject{ID: id, Status: r.Status, Created: created, Summary: resultJSON(id, acceptedStatus)})
	}
	slices.SortFunc(objs, func(a, b vendorapi.VendorObject) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return objs
}

// messageID is the X-Message-Id of an activity msg_id: everything before the
// first '.'.
func messageID(msgID string) string {
	id, _, _ := strings.Cut(msgID, ".")
	return id
}

// rowLimit is how many rows a Lookup asks for: enough for two copies of the op's
// email, so that a duplicate is never cut off the page. The stored args may be the
// redacted form, which keeps one entry per recipient in "to".
func rowLimit(args json.RawMessage) int {
	recipients := 0
	if a, err := tools.DecodeMail(args); err == nil {
		recipients = len(a.To)
	} else {
		var redacted struct {
			To []json.RawMessage `json:"to"`
		}
		if json.Unmarshal(args, &redacted) == nil {
			recipients = len(redacted.To)
		}
	}
	return min(max(lookupLimit, 2*recipients+1), maxActivityLimit)
}

// queryable reports whether id can be put between double quotes in an activity
// query as it is.
func queryable(id string) bool {
	if id == "" {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r >= 0x7f || r == '"' || r == '\'' || r == '\\' {
			return false
		}
	}
	return true
}

// cut shortens s to at most n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// hideKey keeps key out of err's text.
func (v *Vendor) hideKey(err error, key string) error {
	if key != "" && strings.Contains(err.Error(), key) {
		return &scrubbedError{err: err, key: key}
	}
	return err
}

// key is the key of account acct: the tenant's own (a subuser's), else the
// installation's.
func (v *Vendor) key(acct vendorapi.Account) string {
	if acct.APIKey != "" {
		return acct.APIKey
	}
	return v.cfg.APIKey
}

// hideKeyString keeps the API key out of s.
func (v *Vendor) hideKeyString(s string) string { return strings.ReplaceAll(s, v.cfg.APIKey, redacted) }
