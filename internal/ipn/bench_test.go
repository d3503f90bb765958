package ipn_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/ipn"
)

// BenchmarkDeliver measures end-to-end deliveries per second to a fast
// local receiver: claim from SQLite, sign, POST, record the attempt. In the
// same run it measures a plain POST loop of the same body to the same
// receiver at the worker's concurrency to one merchant, and reports the ratio, so the figure
// says what the queue's durability costs on this machine.
//
//	go test -run '^$' -bench BenchmarkDeliver -benchtime 2000x ./internal/ipn/
func BenchmarkDeliver(b *testing.B) {
	workers := ipn.DefaultConfig().PerEndpoint
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	f := newFixture(b)
	s := f.shop(b, srv.URL+"/ipn")
	for range b.N {
		f.pay(b, s)
	}
	evs, err := f.db.IPNEvents(context.Background(), ipn.Filter{MerchantCode: s.Code, Limit: b.N})
	if err != nil || len(evs) != b.N {
		b.Fatalf("%d events, %v", len(evs), err)
	}
	payload := evs[0].Payload

	// Baseline: the same number of POSTs, same body and concurrency.
	plain := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				resp, err := plain.Post(srv.URL+"/ipn", "application/json", bytes.NewReader(payload))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	baseline := float64(b.N) / time.Since(start).Seconds()
	hits.Store(0)

	b.ResetTimer()
	start = time.Now()
	// The server's own settings: what a merchant's backlog drains at.
	cfg := ipn.DefaultConfig()
	cfg.AllowPrivate = true
	stop := f.runWorker(b, cfg, nil)
	for hits.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	stop() // returns once every attempt is recorded
	elapsed := time.Since(start)
	b.StopTimer()
	if st, err := f.db.IPNStats(context.Background()); err != nil || st.Pending != 0 {
		b.Fatalf("%d events still pending, %v", st.Pending, err)
	}
	if n := hits.Load(); n != int64(b.N) {
		b.Fatalf("receiver got %d deliveries for %d events", n, b.N)
	}
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "deliveries/s")
	b.ReportMetric(baseline, "plain-posts/s")
	b.ReportMetric(rate/baseline, "ratio-to-plain")
}
