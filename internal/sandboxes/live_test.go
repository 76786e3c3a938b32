package sandboxes

import "testing"

// TestLiveStreamAdd is the rule table of the live output a replica keeps of a stream: chunks in
// order append, a chunk held already (or partly) adds only what is new, one past a gap replaces
// what is held, and nothing goes past the limit.
func TestLiveStreamAdd(t *testing.T) {
	type chunk struct {
		off  int64
		data string
	}
	for _, c := range []struct {
		name    string
		chunks  []chunk
		limit   int64
		base    int64
		want    string
		changed bool // the last chunk's answer
	}{
		{"in order", []chunk{{0, "ab"}, {2, "cd"}}, 10, 0, "abcd", true},
		{"repeated", []chunk{{0, "ab"}, {0, "ab"}}, 10, 0, "ab", false},
		{"overlapping", []chunk{{0, "ab"}, {1, "bcd"}}, 10, 0, "abcd", true},
		{"empty", []chunk{{0, "ab"}, {2, ""}}, 10, 0, "ab", false},
		{"past a gap", []chunk{{0, "ab"}, {5, "fg"}}, 10, 5, "fg", true},
		{"from the middle", []chunk{{7, "hi"}}, 10, 7, "hi", true},
		{"before what is held", []chunk{{7, "hi"}, {2, "cd"}}, 10, 2, "cd", true},
		{"cut at the limit", []chunk{{0, "abc"}, {3, "defgh"}}, 5, 0, "abcde", true},
		{"full", []chunk{{0, "abcde"}, {5, "f"}}, 5, 0, "abcde", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l liveStream
			var changed bool
			for _, ch := range c.chunks {
				changed = l.add(ch.off, []byte(ch.data), c.limit)
			}
			if string(l.data) != c.want || l.base != c.base || changed != c.changed {
				t.Errorf("held %q from %d (changed %v), want %q from %d (changed %v)", l.data, l.base, changed, c.want, c.base, c.changed)
			}
			if got, off := l.from(c.base + 1); len(c.want) > 0 && (string(got) != c.want[1:] || off != c.base+1) {
				t.Errorf("from %d: %q at %d", c.base+1, got, off)
			}
			if got, off := l.from(0); string(got) != c.want || off != c.base {
				t.Errorf("from 0: %q at %d, want %q at %d", got, off, c.want, c.base)
			}
		})
	}
}
