package store

import "slices"

// PageLimit is the limit of a page of an append-only log (the audit log, the event log): limit
// when it is 1 to 1000, else the default 100.
func PageLimit(limit int) int {
	if limit <= 0 || limit > 1000 {
		return 100
	}
	return limit
}

// ForwardPage cuts rows, read oldest first with LIMIT limit+1, to one page: its first limit
// rows and the cursor of the next page (the id of the page's last row, by id), or "" when rows
// held no more.
func ForwardPage[T any](rows []T, limit int, id func(T) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, id(rows[len(rows)-1])
}

// TailPage cuts rows, read newest first with LIMIT limit+1, to the newest limit rows, oldest
// first, and whether older rows exist.
func TailPage[T any](rows []T, limit int) ([]T, bool) {
	older := len(rows) > limit
	if older {
		rows = rows[:limit]
	}
	slices.Reverse(rows)
	return rows, older
}
