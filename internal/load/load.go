// Package load drives a running gateway through the merchant flow over real
// HTTP and reports throughput and latency as ratios against a baseline
// measured in the same run (GET /healthz), because shared machines are too
// noisy for absolute figures to mean much.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Options configure a run. Requests and Duration both bound it.
type Options struct {
	BaseURL     string
	Credentials merchant.Credentials
	Concurrency int
	Duration    time.Duration // per scenario
	MaxRequests int           // per scenario
	// Card is an approving test card number, supplied by the caller.
	Card string
}

// Result of one scenario.
type Result struct {
	Name      string
	Count     int
	Errors    int
	Elapsed   time.Duration
	Latencies []time.Duration
}

// PerSecond is throughput.
func (r Result) PerSecond() float64 { return float64(r.Count) / r.Elapsed.Seconds() }

// Percentile returns the p-th latency percentile (0–100).
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies)-1) * p / 100)
	return r.Latencies[i]
}

// CheckLoopback refuses targets off this machine: a load run must never
// leave it.
func CheckLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--url %q is not an absolute URL", base)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--url must point at a loopback address (127.0.0.0/8, ::1 or localhost), not %s", host)
}

// Run runs the baseline and each scenario in turn.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if err := CheckLoopback(o.BaseURL); err != nil {
		return nil, err
	}
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency * 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	c, err := client.New(client.Config{BaseURL: o.BaseURL, APIKey: o.Credentials.Test.APIKey,
		Username: o.Credentials.Username, Password: o.Credentials.Password, HTTPClient: httpc})
	if err != nil {
		return nil, err
	}
	token, err := c.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("get a token: %w", err)
	}
	base := strings.TrimSuffix(o.BaseURL, "/")
	newBill := func(ctx context.Context) (*client.Bill, string, error) {
		ref := "LOAD" + secret.RandomUpperAlnum(12)
		b, err := c.CreateBill(ctx, client.BillRequest{Customer: client.Customer{Name: "Load Test"},
			Order: client.Order{BillerCode: o.Credentials.BillerCode, Reference: ref, Amount: "100.00", Currency: "KES",
				Description: "load test", Outlet: o.Credentials.OutletCode}})
		return b, ref, err
	}
	scenarios := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"baseline GET /healthz", func(ctx context.Context) error { return get(ctx, httpc, base+"/healthz") }},
		{"POST /payment/v2/bills", func(ctx context.Context) error { _, _, err := newBill(ctx); return err }},
		{"GET /payment/v2/query", func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/payment/v2/query?billReference=NOSUCHBILL", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			return do(httpc, req, http.StatusNotFound)
		}},
		{"bill + POST /cardPay (approved)", func(ctx context.Context) error {
			b, ref, err := newBill(ctx)
			if err != nil {
				return err
			}
			form := client.PaymentForm{Token: token, OutletCode: o.Credentials.OutletCode, MerchantCode: o.Credentials.MerchantCode,
				Amount: b.Amount, OrderReference: ref, BillReference: b.Reference, CallbackURL: "http://127.0.0.1/callback",
				Card: &client.CardFields{FirstName: "Load", LastName: "Test", Number: o.Card, Security: "123", ExpiryMonth: "12",
					ExpiryYear: fmt.Sprint(time.Now().Year() + 3)}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.PaymentFormAction(), strings.NewReader(form.Values().Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return do(httpc, req, http.StatusOK)
		}},
	}
	var out []Result
	for _, s := range scenarios {
		r := run(ctx, s.name, o, s.op)
		out = append(out, r)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

func get(ctx context.Context, c *http.Client, u string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	return do(c, req, http.StatusOK)
}

func do(c *http.Client, req *http.Request, want int) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d", req.Method, req.URL.Path, resp.StatusCode, want)
	}
	return nil
}

func run(ctx context.Context, name string, o Options, op func(context.Context) error) Result {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var mu sync.Mutex
	res := Result{Name: name}
	var issued atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && issued.Add(1) <= int64(o.MaxRequests) {
				t := time.Now()
				err := op(ctx)
				d := time.Since(t)
				mu.Lock()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					res.Errors++
				} else if err == nil {
					res.Count++
					res.Latencies = append(res.Latencies, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	sort.Slice(res.Latencies, func(i, j int) bool { return res.Latencies[i] < res.Latencies[j] })
	return res
}

// Report writes a table with every scenario's throughput as a ratio of the
// baseline's (the first result).
func Report(w io.Writer, rs []Result) {
	if len(rs) == 0 {
		return
	}
	base := rs[0]
	fmt.Fprintf(w, "%-34s %8s %7s %10s %9s %9s %12s\n", "scenario", "ok", "errors", "per sec", "p50", "p99", "vs baseline")
	for _, r := range rs {
		ratio := r.PerSecond() / base.PerSecond()
		fmt.Fprintf(w, "%-34s %8d %7d %10.1f %9s %9s %11.3fx\n", r.Name, r.Count, r.Errors, r.PerSecond(),
			r.Percentile(50).Round(10*time.Microsecond), r.Percentile(99).Round(10*time.Microsecond), ratio)
	}
}
