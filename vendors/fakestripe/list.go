package fakestripe

import (
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
