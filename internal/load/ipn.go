package load

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/kadipay/kadi/client"
)

// The IPN scenarios need the merchant's test-mode IPN URL pointed at the
// receiver kadi-load runs (kadi merchant set-ipn --url http://ADDR/ipn,
// and kadi serve --allow-private-ipn, as it is on loopback):
//
//   - "payment → IPN": bills paid at a steady rate; the time from a
//     payment's answer to its notification reaching the receiver.
//   - "IPN backlog drain": the receiver holds its door shut while bills are
//     paid, then opens it; how fast the gateway delivers the backlog.

// receiver is the merchant's IPN endpoint: it notes when each bill's
// notification first arrives.
type receiver struct {
	srv *http.Server

	mu      sync.Mutex
	arrived map[string]time.Time // by bill reference
	last    time.Time            // the latest arrival
	gate    chan struct{}        // closed: open door
}

func startReceiver(addr string) (*receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("IPN receiver: %w", err)
	}
	r := &receiver{arrived: map[string]time.Time{}, gate: make(chan struct{})}
	close(r.gate)
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	select {
	case <-gate:
	case <-req.Context().Done():
		return
	}
	var body struct {
		Transaction struct {
			BillNumber string `json:"billNumber"`
		} `json:"transaction"`
	}
	raw, _ := io.ReadAll(io.LimitReader(req.Body, 64<<10))
	if json.Unmarshal(raw, &body) != nil || body.Transaction.BillNumber == "" {
		http.Error(w, "not an IPN", http.StatusBadRequest)
		return
	}
	now := time.Now()
	r.mu.Lock()
	if _, seen := r.arrived[body.Transaction.BillNumber]; !seen {
		r.arrived[body.Transaction.BillNumber] = now
	}
	r.last = now
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) hold() {
	r.mu.Lock()
	r.gate = make(chan struct{})
	r.mu.Unlock()
}

func (r *receiver) open() {
	r.mu.Lock()
	select {
	case <-r.gate:
	default:
		close(r.gate)
	}
	r.mu.Unlock()
}

func (r *receiver) arrival(ref string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.arrived[ref]
	return t, ok
}

// quiet waits until no notification has arrived for d, or until deadline:
// the notifications of earlier scenarios' payments are out of the way.
func (r *receiver) quiet(d time.Duration, deadline time.Time) {
	for time.Now().Before(deadline) {
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		if time.Since(last) >= d {
			return
		}
		time.Sleep(d / 10)
	}
}

// waitAll waits until every ref has arrived or the deadline passes, and
// returns the last arrival.
func (r *receiver) waitAll(refs []string, deadline time.Time) (time.Time, error) {
	for {
		var last time.Time
		missing := 0
		for _, ref := range refs {
			if t, ok := r.arrival(ref); ok {
				if t.After(last) {
					last = t
				}
			} else {
				missing++
			}
		}
		if missing == 0 {
			return last, nil
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("%d of %d notifications never arrived (is the test IPN URL set to the receiver, and serve run with --allow-private-ipn?)", missing, len(refs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ipnScenarios runs both IPN scenarios, once the notifications of the
// scenarios before them have stopped arriving at rcv.
func ipnScenarios(ctx context.Context, o Options, rcv *receiver, c *client.Client, httpc *http.Client, token string) ([]Result, error) {
	rcv.quiet(time.Second, time.Now().Add(2*time.Minute))
	n := max(o.IPNRate*int(o.Duration/time.Second), 100)
	pay := func(b *client.Bill) error {
		_, err := seeOther(httpc, cardPost(ctx, o, c, token, b))
		return err
	}

	// Steady rate: the latency of each notification.
	bills, err := makeBills(ctx, o, c, n)
	if err != nil {
		return nil, err
	}
	steady := Result{Name: fmt.Sprintf("payment → IPN at %d/s", o.IPNRate)}
	acked := make([]time.Time, len(bills)) // each index written by one call
	var mu sync.Mutex                      // guards the results' errors
	start := time.Now()
	paced(ctx, o.Concurrency*4, len(bills), o.IPNRate, func(i int) {
		if err := pay(bills[i]); err != nil {
			mu.Lock()
			steady.failed(err)
			mu.Unlock()
			return
		}
		acked[i] = time.Now()
	})
	paidIn := time.Since(start)
	refs := make([]string, 0, len(bills))
	for i, b := range bills {
		if !acked[i].IsZero() {
			refs = append(refs, b.Reference)
		}
	}
	if _, err := rcv.waitAll(refs, time.Now().Add(60*time.Second)); err != nil {
		return nil, err
	}
	for i, b := range bills {
		if acked[i].IsZero() {
			continue
		}
		at, _ := rcv.arrival(b.Reference)
		steady.Latencies = append(steady.Latencies, max(at.Sub(acked[i]), 0))
	}
	steady.Count, steady.Elapsed = len(refs), paidIn
	sort.Slice(steady.Latencies, func(i, j int) bool { return steady.Latencies[i] < steady.Latencies[j] })

	// Backlog: pay with the receiver's door shut, then open it.
	bills, err = makeBills(ctx, o, c, n)
	if err != nil {
		return nil, err
	}
	drain := Result{Name: "IPN backlog drain"}
	rcv.hold()
	paid := make([]bool, len(bills))
	paced(ctx, o.Concurrency*4, len(bills), 0, func(i int) {
		if err := pay(bills[i]); err == nil {
			paid[i] = true
		} else {
			mu.Lock()
			drain.failed(err)
			mu.Unlock()
		}
	})
	refs = refs[:0]
	for i, b := range bills {
		if paid[i] {
			refs = append(refs, b.Reference)
		}
	}
	opened := time.Now()
	rcv.open()
	last, err := rcv.waitAll(refs, time.Now().Add(120*time.Second))
	if err != nil {
		return nil, err
	}
	drain.Count, drain.Elapsed = len(refs), last.Sub(opened)
	return []Result{steady, drain}, nil
}

// makeBills creates n bills with the run's concurrency.
func makeBills(ctx context.Context, o Options, c *client.Client, n int) ([]*client.Bill, error) {
	bills := make([]*client.Bill, n)
	var mu sync.Mutex
	var firstErr error
	paced(ctx, o.Concurrency, n, 0, func(i int) {
		b, err := newBill(ctx, c, o)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		bills[i] = b
	})
	if firstErr != nil {
		return nil, fmt.Errorf("create bills for the IPN scenarios: %w", firstErr)
	}
	return bills, ctx.Err()
}

// paced calls f(0…n-1) from workers goroutines, at most rate calls a
// second (0: as fast as they go).
func paced(ctx context.Context, workers, n, rate int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	start := time.Now()
	for i := range n {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
}
