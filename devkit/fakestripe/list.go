package fakestripe

import (
	"net/http"
	"net/url"
	"slices"
	"time"
)

// sortKey orders objects as Stripe lists them: by created time, then by
// creation order.
type sortKey struct {
	created time.Time
	seq     int64
}

// compare returns -1 if a is older than b, +1 if newer, 0 if equal.
func (a sortKey) compare(b sortKey) int {
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// listJSON is Stripe's list object.
type listJSON[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// searchJSON is Stripe's search result object.
type searchJSON[T any] struct {
	Object   string  `json:"object"`
	Data     []T     `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
	URL      string  `json:"url"`
}

// paginate sorts items newest first and cuts one page of at most limit items:
// those older than after, or the ones just newer than before, or the newest.
func paginate[T any](items []T, keyOf func(T) sortKey, limit int, after, before *sortKey) (page []T, hasMore bool) {
	slices.SortFunc(items, func(a, b T) int { return keyOf(b).compare(keyOf(a)) })
	switch {
	case after != nil:
		items = slices.DeleteFunc(items, func(it T) bool { return keyOf(it).compare(*after) >= 0 })
	case before != nil:
		items = slices.DeleteFunc(items, func(it T) bool { return keyOf(it).compare(*before) <= 0 })
		if len(items) > limit {
			return items[len(items)-limit:], true
		}
		return items, false
	}
	if len(items) > limit {
		return items[:limit], true
	}
	return items, false
}

// list answers a list endpoint at path: the records of all that q's created filter
// matches and keep accepts, newest first, one page of them as q's limit,
// starting_after and ending_before ask (ids of byID; an unknown one is Stripe's 400
// naming the parameter and object). s.mu must be held.
func list[R, J any](q url.Values, all []R, byID map[string]R, keyOf func(R) sortKey, toJSON func(R) J, object, path string,
	keep func(R) bool,
) result {
	created, err := parseCreatedFilter(q)
	if err != nil {
		return err.result()
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err.result()
	}
	var after, before *sortKey
	for name, dst := range map[string]**sortKey{"starting_after": &after, "ending_before": &before} {
		id, ok := formString(q, name)
		if !ok || id == "" {
			continue
		}
		rec, found := byID[id]
		if !found {
			return resourceMissing(http.StatusBadRequest, name, object, id).result()
		}
		k := keyOf(rec)
		*dst = &k
	}
	var items []R
	for _, rec := range all {
		if created.match(keyOf(rec).created) && keep(rec) {
			items = append(items, rec)
		}
	}
	page, hasMore := paginate(items, keyOf, limit, after, before)
	out := listJSON[J]{Object: "list", Data: []J{}, HasMore: hasMore, URL: path}
	for _, rec := range page {
		out.Data = append(out.Data, toJSON(rec))
	}
	return jsonResult(out)
}

// getObject answers a GET of the object of byID that the path's {id} names, or
// Stripe's 404 naming param and object.
func getObject[R, J any](s *Server, w http.ResponseWriter, r *http.Request, byID map[string]R, toJSON func(R) J, param, object string) {
	id := r.PathValue("id")
	s.mu.Lock()
	rec, ok := byID[id]
	var res result
	if ok {
		res = jsonResult(toJSON(rec))
	} else {
		res = resourceMissing(http.StatusNotFound, param, object, id).result()
	}
	s.mu.Unlock()
	s.writeResult(w, r, res)
}
