package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// TestIPNCrashRecovery: payments are made while the merchant's IPN receiver
// is down, the gateway is killed with SIGKILL, restarted, and the receiver
// comes up on the same port. Every approved payment's notification must
// arrive, verified by the client package; a declined payment's never does.
func TestIPNCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the kadi binary")
	}
	bin := ipnBuild(t)
	dataDir := t.TempDir()

	var creds struct {
		MerchantCode string `json:"merchantCode"`
		Password     string `json:"password"`
		BillerCode   string `json:"billerCode"`
		OutletCode   string `json:"outletCode"`
		Test         struct {
			APIKey             string `json:"apiKey"`
			NotificationSecret string `json:"notificationSecret"`
		} `json:"test"`
	}
	out := ipnKadi(t, bin, "merchant", "create", "--data-dir", dataDir, "--name", "Crash Test Shop", "--json")
	if err := json.Unmarshal(out, &creds); err != nil {
		t.Fatalf("merchant create --json: %v: %s", err, out)
	}
	receiverAddr := "127.0.0.1:" + ipnFreePort(t) // nothing listens here yet
	ipnKadi(t, bin, "merchant", "set-ipn", "--data-dir", dataDir, "--merchant", creds.MerchantCode, "--mode", "test",
		"--url", "http://"+receiverAddr+"/kadi/ipn", "--username", "shop-ipn", "--password", "ipn-s3cret-passw0rd")

	// Retries fast enough for a test, long enough (about a minute) that the
	// schedule cannot run out while the receiver is down.
	schedule := "100ms,250ms" + strings.Repeat(",1s", 60)
	gwAddr := "127.0.0.1:" + ipnFreePort(t)
	serveArgs := []string{"serve", "--addr", gwAddr, "--data-dir", dataDir, "--allow-private-ipn",
		"--ipn-retry-schedule", schedule, "--ipn-timeout", "2s", "--ipn-lease", "3s", "--ipn-poll", "100ms", "--metrics-refresh", "100ms"}
	gw := ipnStartGateway(t, bin, gwAddr, serveArgs, "first")

	kadi, err := client.New(client.Config{BaseURL: "http://" + gwAddr, APIKey: creds.Test.APIKey,
		Username: creds.MerchantCode, Password: creds.Password})
	if err != nil {
		t.Fatal(err)
	}
	cards := []struct {
		number, cvv string
		approved    bool
	}{
		{"4242424242424242", "123", true},
		{"4000000000000002", "123", false}, // generic decline
		{"5555555555554444", "123", true},
		{"4000000000009995", "123", false}, // insufficient funds
		{"378282246310005", "1234", true},
		{"4111111111111111", "123", true},
	}
	var approved, declined []string
	for i, c := range cards {
		billRef := ipnPay(t, kadi, "http://"+gwAddr, creds.MerchantCode, creds.BillerCode, creds.OutletCode, fmt.Sprintf("CRASH%d", i), c.number, c.cvv, c.approved)
		if c.approved {
			approved = append(approved, billRef)
		} else {
			declined = append(declined, billRef)
		}
	}

	// The gateway has tried, and failed, to reach the receiver: the
	// notifications sit in the queue with attempts recorded.
	ipnWait(t, "failed attempts while the receiver is down", func() bool {
		var evs []struct {
			Status   string `json:"status"`
			Attempts int    `json:"attempts"`
		}
		out := ipnKadi(t, bin, "ipn", "list", "--data-dir", dataDir, "--merchant", creds.MerchantCode, "--json")
		if err := json.Unmarshal(out, &evs); err != nil {
			t.Fatalf("ipn list --json: %v: %s", err, out)
		}
		tried := 0
		for _, e := range evs {
			if e.Status == "pending" && e.Attempts > 0 {
				tried++
			}
		}
		if len(evs) > len(approved) {
			t.Fatalf("%d IPN events for %d approved payments", len(evs), len(approved))
		}
		return tried == len(approved)
	})

	// Monitoring sees the backlog and the failed attempts, once the
	// background refresh has read the queue.
	ipnWait(t, "metrics while the receiver is down", func() bool {
		metrics := ipnMetrics(t, "http://"+gwAddr)
		return metrics["kadi_ipn_queue_depth"] == float64(len(approved)) && metrics[`kadi_ipn_deliveries_total{outcome="retry"}`] >= float64(len(approved)) &&
			metrics["kadi_ipn_oldest_pending_age_seconds"] > 0
	})

	gw.kill()
	gw = ipnStartGateway(t, bin, gwAddr, serveArgs, "restarted")

	// The receiver comes up on the port the notifications are addressed to.
	var mu sync.Mutex
	got := map[string]int{} // bill reference → deliveries
	ids := map[string]string{}
	var refused []string
	verify, err := client.NewIPNHandler(client.IPNConfig{Secret: creds.Test.NotificationSecret, Username: "shop-ipn", Password: "ipn-s3cret-passw0rd"},
		func(_ context.Context, n client.Notification) error {
			mu.Lock()
			defer mu.Unlock()
			got[n.Transaction.BillNumber]++
			if prev, ok := ids[n.Transaction.BillNumber]; ok && prev != n.ID {
				t.Errorf("bill %s notified with two webhook-ids: %s and %s", n.Transaction.BillNumber, prev, n.ID)
			}
			ids[n.Transaction.BillNumber] = n.ID
			if n.Transaction.Amount != "1500.00" || !n.Successful() {
				t.Errorf("notification for %s: amount %s status %s", n.Transaction.BillNumber, n.Transaction.Amount, n.Transaction.Status)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", receiverAddr)
	if err != nil {
		t.Fatalf("receiver cannot take its port back: %v", err)
	}
	receiver := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &ipnStatusRecorder{ResponseWriter: w}
		verify.ServeHTTP(rec, r)
		if rec.status/100 != 2 {
			mu.Lock()
			refused = append(refused, fmt.Sprintf("%s %d", r.URL.Path, rec.status))
			mu.Unlock()
		}
	})}
	go func() { _ = receiver.Serve(ln) }()
	t.Cleanup(func() { receiver.Close() })

	ipnWait(t, "every approved payment's notification", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ref := range approved {
			if got[ref] == 0 {
				return false
			}
		}
		return true
	})
	ipnWait(t, "an empty queue", func() bool { return ipnMetrics(t, "http://"+gwAddr)["kadi_ipn_queue_depth"] == 0 })
	if m := ipnMetrics(t, "http://"+gwAddr); m[`kadi_ipn_deliveries_total{outcome="delivered"}`] < float64(len(approved)) ||
		m["kadi_ipn_delivery_duration_seconds_count"] < float64(len(approved)) {
		t.Errorf("metrics after delivery: %v", m)
	}
	gw.stop()

	mu.Lock()
	defer mu.Unlock()
	for _, ref := range declined {
		if got[ref] != 0 {
			t.Errorf("declined bill %s was notified", ref)
		}
	}
	if len(got) != len(approved) {
		t.Errorf("notifications for %d bills, want the %d approved: %v", len(got), len(approved), got)
	}
	if len(refused) > 0 {
		t.Errorf("receiver refused deliveries (bad signature or credentials): %v", refused)
	}
	var evs []struct{ Status string }
	out = ipnKadi(t, bin, "ipn", "list", "--data-dir", dataDir, "--merchant", creds.MerchantCode, "--status", "delivered", "--json")
	if err := json.Unmarshal(out, &evs); err != nil || len(evs) != len(approved) {
		t.Errorf("ipn list --status delivered: %d events (%v), want %d", len(evs), err, len(approved))
	}
}

// ipnMetrics reads the gateway's /metrics into series → value.
func ipnMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

type ipnStatusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *ipnStatusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func ipnBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kadi")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/kadipay/kadi/cmd/kadi")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func ipnKadi(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kadi %s: %v\n%s", strings.Join(args, " "), err, errOut.Bytes())
	}
	return out.Bytes()
}

func ipnFreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

type ipnGateway struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// ipnStartGateway runs `kadi serve` and waits for /healthz. Its log goes to
// a file, shown if the test fails.
func ipnStartGateway(t *testing.T, bin, addr string, args []string, name string) *ipnGateway {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &ipnGateway{t: t, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); logFile.Close(); close(g.done) }()
	t.Cleanup(func() {
		g.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s gateway log:\n%s", name, b)
		}
	})
	ipnWait(t, "the gateway to answer /healthz", func() bool {
		select {
		case <-g.done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("kadi serve exited:\n%s", b)
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// kill is kill -9: no shutdown code runs.
func (g *ipnGateway) kill() {
	_ = g.cmd.Process.Kill()
	<-g.done
}

// stop is a graceful SIGTERM.
func (g *ipnGateway) stop() {
	_ = g.cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.done:
	case <-time.After(45 * time.Second):
		g.t.Error("gateway did not stop within 45s of SIGINT")
		g.kill()
	}
}

// ipnPay creates a bill with the client package and posts the hosted form
// with the card fields filled in, as a merchant's page would; it returns
// the bill reference after checking the outcome the callback page carries.
func ipnPay(t *testing.T, kadi *client.Client, base, code, biller, outlet, orderRef, number, cvv string, wantApproved bool) string {
	t.Helper()
	ctx := context.Background()
	bill, err := kadi.CreateBill(ctx, client.BillRequest{
		Customer: client.Customer{Name: "Wanjiku Kamau"},
		Order:    client.Order{BillerCode: biller, Reference: orderRef, Amount: "1500.00", Currency: "KES", Description: "Crash test", Outlet: outlet},
	})
	if err != nil {
		t.Fatalf("create bill: %v", err)
	}
	token, err := kadi.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{
		"token": {token}, "outletCode": {outlet}, "merchantCode": {code}, "amount": {bill.Amount},
		"orderReference": {orderRef}, "billReference": {bill.Reference}, "productType": {"tickets"},
		"productDescription": {"Crash test"}, "serviceDate": {"2026-11-21"},
		"cardFirstName": {"Wanjiku"}, "cardLastName": {"Kamau"}, "cardNumber": {number}, "cardSecurity": {cvv},
		"cardExpiryMonth": {"12"}, "cardExpiryYear": {fmt.Sprint(time.Now().Year() + 3)},
		"customerFirstName": {"Wanjiku"}, "customerLastName": {"Kamau"}, "country": {"KE"},
		"mobileNumber": {"+254 712345678"}, "emailAddress": {"wanjiku@example.com"}, "city": {"Nairobi"},
		"callbackUrl": {"https://shop.example/kadi/callback"},
	}
	resp, err := browserless.PostForm(base+"/cardPay", form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := client.StatusFailed
	if wantApproved {
		want = client.StatusSuccessful
	}
	if !bytes.Contains(body, []byte(want)) {
		t.Fatalf("card ending %s: HTTP %d, page lacks %q:\n%s", number[len(number)-4:], resp.StatusCode, want, body)
	}
	return bill.Reference
}

func ipnWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
