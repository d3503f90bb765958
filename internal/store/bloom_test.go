package store

import (
	"fmt"
	"sync"
	"testing"
)

// Every key added is found, across the layers a growing filter starts and
// while others are added beside it; keys never added are mostly not.
func TestBloomHasEveryKeyAdded(t *testing.T) {
	f := newBloom(1 << 10)
	const writers, each = 8, 20_000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				f.add(fmt.Sprintf("added %d %d", w, i))
			}
		})
	}
	wg.Wait()
	if n := len(*f.layers.Load()); n < 5 {
		t.Errorf("%d layers for %d keys from a filter sized for 1,024: it did not grow", n, writers*each)
	}
	for w := range writers {
		for i := range each {
			if key := fmt.Sprintf("added %d %d", w, i); !f.mayContain(key) {
				t.Fatalf("%q was added and is not found", key)
			}
		}
	}
	rate := falsePositives(f, 100_000)
	t.Logf("%d layers, %.2f %% false positives", len(*f.layers.Load()), 100*rate)
	if rate > 0.03 {
		t.Errorf("%.1f %% of keys never added are perhaps there, want about 1 %%", 100*rate)
	}
}

// Past its bound a filter stops growing and still finds every key added;
// only its false positives grow.
func TestBloomStopsGrowingAtItsBound(t *testing.T) {
	const bound = 1 << 16 // bits
	for _, sized := range []int64{1 << 10, 1 << 30} {
		f := newBoundedBloom(sized, bound)
		for i := range 50_000 {
			f.add(fmt.Sprintf("key %d", i))
		}
		if got := f.bytes(); got*8 > bound {
			t.Errorf("sized for %d keys: %d bits, over the bound of %d", sized, got*8, bound)
		}
		for i := range 50_000 {
			if key := fmt.Sprintf("key %d", i); !f.mayContain(key) {
				t.Fatalf("sized for %d keys: %q was added and is not found", sized, key)
			}
		}
	}
}

func falsePositives(f *bloom, n int) float64 {
	perhaps := 0
	for i := range n {
		if f.mayContain(fmt.Sprintf("never added %d", i)) {
			perhaps++
		}
	}
	return float64(perhaps) / float64(n)
}

// BenchmarkBloom is a lookup of a key never added, in a filter of ten
// million bills' keys (what the query of no such bill pays instead of a
// read), and its memory:
//
//	go test -run '^$' -bench Bloom ./internal/store
func BenchmarkBloom(b *testing.B) {
	const keys = 20_000_000
	f := newBloom(keys)
	for i := range keys {
		f.add(fmt.Sprintf("r\x001234567890\x00test\x00%012d", i))
	}
	b.ResetTimer()
	for i := range b.N {
		f.mayContain(fmt.Sprintf("o\x001234567890\x00test\x00NOSUCH%d", i))
	}
	b.ReportMetric(float64(f.bytes())/(1<<20), "MiB")
}
