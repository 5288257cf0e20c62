package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/vendorapi"
)

// maxLookupBytes caps the lookup answer read.
const maxLookupBytes = 4 << 20

// Lookup asks the op's target for the objects tagged with the op's id, with
// GET <BaseURL><LookupPath>?oncebox_op=<op id>. It returns
// vendorapi.ErrLookupUnavailable (wrapped) when Config.LookupPath is empty, when
// the op's target is no longer configured, or when the endpoint answers 403
// or 404; other failures are returned as they are.
func (v *Vendor) Lookup(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	if v.cfg.LookupPath == "" {
		return nil, fmt.Errorf("webhook targets cannot be asked: %w", vendorapi.ErrLookupUnavailable)
	}
	a, err := decodeArgs(p.Args)
	if err != nil {
		return nil, fmt.Errorf("webhook lookup of op %s: %w", p.OpID, err)
	}
	target, ok := v.cfg.Targets[a.Target]
	if !ok {
		return nil, fmt.Errorf("webhook target %q is not configured: %w", a.Target, vendorapi.ErrLookupUnavailable)
	}
	u, err := joinURL(target.BaseURL, v.cfg.LookupPath, url.Values{vendorapi.TagKey: {p.OpID}})
	if err != nil {
		return nil, fmt.Errorf("webhook lookup URL: %w", hideURL(err, "GET", a.Target, v.cfg.LookupPath, target.BaseURL))
	}

	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook lookup request: %w", hideURL(err, "GET", a.Target, v.cfg.LookupPath, target.BaseURL))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "oncebox-webhook")
	if target.SecretHeader != "" {
		req.Header.Set(target.SecretHeader, target.Secret)
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		// The transport's error names the whole URL, which may hold a credential.
		return nil, fmt.Errorf("webhook lookup: %w", &errorWithoutSecret{err: hideURL(err, "GET", a.Target, v.cfg.LookupPath, target.BaseURL), secret: target.Secret})
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLookupBytes))
	if err != nil {
		return nil, fmt.Errorf("webhook lookup: %w", &errorWithoutSecret{err: hideURL(err, "read answer of GET", a.Target, v.cfg.LookupPath, target.BaseURL), secret: target.Secret})
	}
	v.cfg.Logger.DebugContext(ctx, "webhook lookup", append(tracing.SpanLogAttrs(ctx),
		slog.String("op_id", p.OpID), slog.String("target", a.Target), slog.Int("status", resp.StatusCode))...)
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("webhook target %q answered HTTP %d to the lookup: %w", a.Target, resp.StatusCode, vendorapi.ErrLookupUnavailable)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("webhook target %q answered HTTP %d to the lookup", a.Target, resp.StatusCode)
	}
	return decodeLookup(redact(body, target.Secret), p.OpID, v.cfg.MaxResultBytes)
}

// decodeLookup reads {"objects":[{"id":..,"created":..,"status":..,"body":..}]}. Each
// object's Summary, the result of an op the reconciler settles from it, has the shape of
// a dispatched op's result, {"status":<status>,"body":<body>}: the object's "status"
// and "body" (what the target answered the call) when it gives them, else 200 and the
// object itself. A replay of the op reads the same shape however the op was settled.
func decodeLookup(body []byte, opID string, maxBytes int) (*vendorapi.LookupResult, error) {
	var page struct {
		Objects []json.RawMessage `json:"objects"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("decode webhook lookup answer: %w", err)
	}
	res := &vendorapi.LookupResult{}
	for _, raw := range page.Objects {
		var obj struct {
			ID      string          `json:"id"`
			Created string          `json:"created"`
			Status  *int            `json:"status"`
			Body    json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("decode webhook lookup object: %w", err)
		}
		if obj.ID == "" {
			return nil, fmt.Errorf("webhook lookup object without an id: %s", raw)
		}
		created, err := time.Parse(time.RFC3339, obj.Created)
		if err != nil {
			return nil, fmt.Errorf("webhook lookup object %s: created: %w", obj.ID, err)
		}
		status, answer := http.StatusOK, []byte(raw)
		if obj.Status != nil {
			if *obj.Status < 200 || *obj.Status > 299 {
				return nil, fmt.Errorf("webhook lookup object %s: status %d is not a 2xx (a listed object is one the call made)", obj.ID, *obj.Status)
			}
			status = *obj.Status
		}
		if len(obj.Body) > 0 && string(obj.Body) != "null" {
			answer = obj.Body
		}
		res.Objects = append(res.Objects, vendorapi.VendorObject{
			ID:      obj.ID,
			OpID:    opID,
			Created: created,
			Summary: resultJSON(status, answer, maxBytes),
		})
	}
	return res, nil
}
