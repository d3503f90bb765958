package store_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCheckoutWrites is the gateway's own writes for one paid bill on
// the SQLite store, as a checkout makes them: the bill, the payment
// started, the payment finished with its IPN outbox row.
//
//	go test -run '^$' -bench CheckoutWrites ./internal/store/
func BenchmarkCheckoutWrites(b *testing.B) {
	db := ipnOpen(b, filepath.Join(b.TempDir(), "kadi.db"))
	code := ipnMerchant(b, db, "http://127.0.0.1:9/ipn")
	underLoad(b, func() error {
		_, err := queueIPNEvent(b.Context(), db, code, time.Now())
		return err
	})
}

// underLoad runs op from 32 goroutines at once, as under load, so that the
// group-commit writer shares each fsync and what each write costs inside
// it (its statements, the index entries they move) shows. Beside the wall
// time it reports the process's CPU time per op (cpu-ns/op): on a shared
// machine whose disk sets the pace the first swings by a fifth from run to
// run, the second holds within a few percent.
func underLoad(b *testing.B, op func() error) {
	b.SetParallelism(16) // 32 goroutines on two cores
	before := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
