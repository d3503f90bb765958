package load

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestAlternate(t *testing.T) {
	var order []string
	slice := func(name string, count int, lat time.Duration) func() Result {
		return func() Result {
			order = append(order, name)
			return Result{Name: name, Count: count, Errors: 1, Elapsed: time.Second,
				Latencies: []time.Duration{lat * time.Duration(len(order))}, ServerCPU: time.Millisecond,
				LoadCPU: 2 * time.Millisecond, PeakRSS: int64(len(order)),
				Writer: writerStats{writes: 3, commits: 1, busy: 100 * time.Millisecond}}
		}
	}
	base, scen := alternate(context.Background(), slice("base", 10, time.Millisecond), slice("scen", 4, -time.Millisecond))
	if got := strings.Join(order, " "); got != strings.TrimSpace(strings.Repeat("base scen ", rounds)) {
		t.Fatalf("slices ran in the order %q, want base and scen in turns, %d each", got, rounds)
	}
	for _, c := range []struct {
		r     Result
		name  string
		count int
		rss   int64
	}{{base, "base", 10 * rounds, 2*rounds - 1}, {scen, "scen", 4 * rounds, 2 * rounds}} {
		r := c.r
		if r.Name != c.name || r.Count != c.count || r.Errors != rounds || r.Elapsed != rounds*time.Second ||
			r.ServerCPU != rounds*time.Millisecond || r.LoadCPU != 2*rounds*time.Millisecond || r.PeakRSS != c.rss ||
			r.Writer.writes != 3*rounds || r.Writer.commits != rounds || r.Writer.busy != rounds*100*time.Millisecond {
			t.Errorf("%s summed to %+v", c.name, r)
		}
		if len(r.Latencies) != rounds {
			t.Fatalf("%s: %d latencies, want one a slice", c.name, len(r.Latencies))
		}
		for i := 1; i < len(r.Latencies); i++ {
			if r.Latencies[i] < r.Latencies[i-1] {
				t.Errorf("%s: latencies not sorted: %v", c.name, r.Latencies)
			}
		}
	}
}

func TestAlternateStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	a := func() Result { n++; return Result{Count: 1, Elapsed: time.Second} }
	b := func() Result { n++; cancel(); return Result{Count: 1, Elapsed: time.Second} }
	alternate(ctx, a, b)
	if n != 2 {
		t.Errorf("%d slices ran after the context ended in the first round, want 2", n)
	}
}

// TestReportRatiosAgainstPairedBaselines: a scenario's ratio is against
// the /healthz it alternated with, not against the one measured with the
// minimal server, and so on down the table.
func TestReportRatiosAgainstPairedBaselines(t *testing.T) {
	res := func(name string, perSecond int) Result {
		return Result{Name: name, Count: perSecond, Elapsed: time.Second}
	}
	minimal, health := res("minimal", 40000), res("healthz", 20000)
	pairedMinimal, pairedHealth := res("minimal", 25000), res("healthz", 10000)
	minimal.Paired, health.Paired = &health, &pairedMinimal
	bills := res("bills", 3000)
	bills.Paired = &pairedHealth
	// 1.2 s of the server's CPU and 0.3 s of kadi-load's in the second.
	bills.ServerCPU, bills.LoadCPU = 1200*time.Millisecond, 300*time.Millisecond
	paced := res("paced", 1500)
	var buf bytes.Buffer
	Report(&buf, []Result{minimal, health, bills, paced})
	want := map[string][3]string{
		"minimal": {"1.000x", "2.000x", "20000"}, // against the /healthz beside it
		"healthz": {"0.800x", "1.000x", "25000"}, // 20,000 against 25,000
		"bills":   {"0.240x", "0.300x", "10000"}, // 3,000 against 10,000; × 0.8
		"paced":   {"0.037x", "0.075x", "—"},     // no pair: the baselines' rows
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")[1:]
	if len(lines) != len(want) {
		t.Fatalf("report:\n%s", buf.String())
	}
	for _, l := range lines {
		f := strings.Fields(l)
		w, ok := want[f[0]]
		if !ok {
			t.Fatalf("unexpected row %q", l)
		}
		// name ok errors per-sec p50 p99 vs-minimal vs-healthz …
		if f[6] != w[0] || f[7] != w[1] || f[len(f)-1] != w[2] {
			t.Errorf("%s: vs minimal %s, vs /healthz %s, paired %s/s; want %s, %s, %s", f[0], f[6], f[7], f[len(f)-1], w[0], w[1], w[2])
		}
		cores := "—"
		if f[0] == "bills" {
			cores = fmt.Sprintf("1.50/%d", runtime.NumCPU())
		}
		if f[len(f)-2] != cores {
			t.Errorf("%s: cores used %s, want %s", f[0], f[len(f)-2], cores)
		}
	}
}
