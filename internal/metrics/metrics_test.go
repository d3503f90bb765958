package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every gateway's registry carries the standard runtime and process
// series, and its own: two registries never share a series.
func TestRegistry(t *testing.T) {
	a, b := New(), New()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kadi_test_total", Help: "A test counter."})
	a.MustRegister(c)
	c.Add(3)
	var text strings.Builder
	if err := a.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\ngo_goroutines ", "\ngo_memstats_heap_alloc_bytes ", "\nprocess_resident_memory_bytes ", "\nprocess_open_fds ", "\nkadi_test_total 3\n"} {
		if !strings.Contains("\n"+text.String(), want) {
			t.Errorf("no %q in:\n%s", want, text.String())
		}
	}
	text.Reset()
	if err := b.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "kadi_test_total") {
		t.Error("a series registered in one registry shows in another")
	}
}
