package client

import (
	"context"
	"iter"
)

// pages iterates over every item of a paged list: it calls page with "" first, then with each
// answer's nextCursor until one has none. An error is yielded once, as the last pair; a
// loop that breaks early stops the paging.
func pages[T any](ctx context.Context, page func(ctx context.Context, cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			items, next, err := page(ctx, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}
