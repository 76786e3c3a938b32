package document

import (
	"bytes"
	"encoding/json"
	"github.com/go-json-experiment/json/jsontext"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPUTime(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CPUTIME_N"))
	if n == 0 {
		t.Skip()
	}
	raw, _ := json.Marshal(limitsDocument())
	for range 5 {
		Decode(raw)
	}
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	c0, w0 := cpuNow(), time.Now()
	for range n {
		if _, err := Decode(raw); err != nil {
			t.Fatal(err)
		}
	}
	c1, w1 := cpuNow(), time.Now()
	runtime.ReadMemStats(&ms1)
	t.Logf("cpu/op %v wall/op %v allocs/op %d bytes/op %d", (c1-c0)/time.Duration(n), w1.Sub(w0)/time.Duration(n), (ms1.Mallocs-ms0.Mallocs)/uint64(n), (ms1.TotalAlloc-ms0.TotalAlloc)/uint64(n))
}

func BenchmarkZZParse(b *testing.B) {
	raw, _ := json.Marshal(limitsDocument())
	b.ReportAllocs()
	for b.Loop() {
		parse(raw)
	}
}

func BenchmarkZZMapCheck(b *testing.B) {
	raw, _ := json.Marshal(limitsDocument())
	root, _ := parse(raw)
	b.ReportAllocs()
	for b.Loop() {
		m := mapper{bad: make(map[string]struct{})}
		doc := m.document(root)
		doc.check()
	}
}

func BenchmarkZZValidate(b *testing.B) {
	d := limitsDocument()
	b.ReportAllocs()
	for b.Loop() {
		d.check()
	}
}

func BenchmarkZZJsontextOnly(b *testing.B) {
	raw, _ := json.Marshal(limitsDocument())
	b.ReportAllocs()
	for b.Loop() {
		dec := jsontext.NewDecoder(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		for {
			if _, err := dec.ReadToken(); err != nil {
				break
			}
		}
	}
}
