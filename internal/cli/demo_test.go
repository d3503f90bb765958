package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer lets the test read what the running command prints.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

func hiddenFields(t *testing.T, page string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	if len(v) == 0 {
		t.Fatalf("no hidden inputs in:\n%s", page)
	}
	return v
}

func postForm(t *testing.T, to string, v url.Values) string {
	t.Helper()
	resp, err := http.PostForm(to, v)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s\n%s", to, resp.Status, body)
	}
	return string(body)
}

// TestDemo runs `kadi demo` and buys something from its shop the way a
// newcomer would: shop → hosted card page → callback → verified order, then
// the signed IPN shows up on the shop's order page.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--shop-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo: %v", err)
		}
	})
	shopLine := regexp.MustCompile(`Demo shop\s+(http://\S+)`)
	gatewayLine := regexp.MustCompile(`Gateway API\s+(http://\S+)`)
	deadline := time.Now().Add(20 * time.Second)
	for !shopLine.MatchString(stdout.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no shop URL:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	shop := shopLine.FindStringSubmatch(stdout.String())[1]
	gateway := gatewayLine.FindStringSubmatch(stdout.String())[1]
	for _, want := range []string{"merchant code", "test API key", "password", "4242 4242 4242 4242", gateway + "/docs"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if resp, err := http.Get(gateway + "/docs"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the API reference the demo names: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	checkout := postForm(t, shop+"/checkout", url.Values{"product": {"kenya-aa"}})
	form := hiddenFields(t, checkout)
	if !strings.Contains(checkout, `action="`+gateway+`/cardPay"`) || form.Get("cardNumber") != "" {
		t.Fatalf("checkout page does not post a card-less form to the gateway:\n%s", checkout)
	}
	// The token in the shopper's page can only pay: whoever reads the page
	// cannot create bills or read other orders with it.
	req, _ := http.NewRequest(http.MethodGet, gateway+"/payment/v2/query?billReference="+form.Get("billReference"), nil)
	req.Header.Set("Authorization", "Bearer "+form.Get("token"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("the checkout page's token reads payments: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	// Without card fields the gateway shows its own card page.
	cardPage := postForm(t, gateway+"/cardPay", form)
	if !strings.Contains(cardPage, `name="cardNumber"`) {
		t.Fatalf("no card-entry page:\n%s", cardPage)
	}
	entry := hiddenFields(t, cardPage)
	entry.Set("cardNumber", "4242 4242 4242 4242")
	entry.Set("cardExpiryMonth", "12")
	entry.Set("cardExpiryYear", time.Now().AddDate(2, 0, 0).Format("2006"))
	entry.Set("cardSecurity", "123")
	entry.Set("cardFirstName", "Demo")
	entry.Set("cardLastName", "Customer")
	redirect := postForm(t, gateway+"/cardPay", entry)
	callback := hiddenFields(t, redirect)
	if callback.Get("orderStatus") != "Transaction Successfull" {
		t.Fatalf("payment failed: %v", callback)
	}
	result := postForm(t, shop+"/callback", callback)
	if !strings.Contains(result, "Payment confirmed") || !strings.Contains(result, callback.Get("transactionRef")) {
		t.Fatalf("shop did not confirm the verified payment:\n%s", result)
	}

	orderURL := shop + "/orders/" + callback.Get("billReference")
	deadline = time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(orderURL)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(page), "IPN received and verified") && strings.Contains(string(page), callback.Get("transactionRef")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no verified IPN reached the demo shop:\n%s", page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A busy port is the commonest first-run failure: the demo names the flag
// that moves it.
func TestDemoBusyPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"--addr", taken.Addr().String(), "--shop-addr", "127.0.0.1:0"}, "--addr"},
		{[]string{"--addr", "127.0.0.1:0", "--shop-addr", taken.Addr().String()}, "--shop-addr"},
	} {
		var stdout, stderr syncBuffer
		err := run(context.Background(), append([]string{"demo", "--data-dir", t.TempDir()}, tt.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("demo %v on a taken port: %v, want it to name %s", tt.args, err, tt.flag)
		}
	}
}

// An address that cannot be one is a usage mistake, said before the demo
// makes its data dir or opens a store.
func TestDemoRefusesAnAddressThatIsNone(t *testing.T) {
	for _, args := range [][]string{{"--addr", "8080"}, {"--shop-addr", "127.0.0.1:70000"}, {"--metrics-addr", "localhost"}} {
		var stdout, stderr syncBuffer
		err := run(context.Background(), append([]string{"demo"}, args...), &stdout, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), args[0]+" "+strconv.Quote(args[1])+" is not host:port") {
			t.Errorf("demo %v: %v, want a usage error naming it\n%s", args, err, stderr.String())
		}
	}
}

// Without --data-dir the demo runs on a temporary dir and removes it when
// it stops.
func TestDemoRemovesItsDataDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--shop-addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	dataLine := regexp.MustCompile(`Data dir\s+(\S+) \(removed when the demo stops`)
	deadline := time.Now().Add(20 * time.Second)
	for !dataLine.MatchString(stdout.String()) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("demo printed no temporary data dir:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	dir := dataLine.FindStringSubmatch(stdout.String())[1]
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("data dir while running: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir %s left behind after the demo stopped: %v", dir, err)
	}
}

// A --data-dir given is kept, whatever its name: kadi-data, the README's,
// was taken for "not given", run on a temporary dir and removed.
func TestDemoKeepsAGivenDataDir(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--data-dir", "kadi-data", "--addr", "127.0.0.1:0", "--shop-addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "Data dir") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("demo printed no data dir:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo: %v", err)
	}
	if !regexp.MustCompile(`Data dir\s+kadi-data\n`).MatchString(stdout.String()) {
		t.Errorf("the demo did not run on kadi-data:\n%s", stdout.String())
	}
	if _, err := os.Stat("kadi-data/kadi.db"); err != nil {
		t.Errorf("kadi-data not kept after the demo stopped: %v", err)
	}
}

// The demo's shop and printout assume one listener: split ones are refused
// with a reason, not printed as links that 404.
func TestDemoRefusesSplitListeners(t *testing.T) {
	for _, split := range [][]string{{"--form-addr", "127.0.0.1:0"}, {"--dashboard-addr", "127.0.0.1:0"}, {"--form-public-url", "https://checkout.example"},
		// serve's refusal too: a maximum for a currency bills may not use.
		{"--max-amount", "100,JPY=5"}} {
		var stdout, stderr syncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a demo that starts runs until then
		err := run(ctx, append([]string{"demo", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--shop-addr", "127.0.0.1:0"}, split...), &stdout, &stderr)
		cancel()
		if err != errUsage || !strings.Contains(stderr.String(), "kadi serve") && !strings.Contains(stderr.String(), "does not take it") {
			t.Errorf("demo %v: %v\n%s", split, err, stderr.String())
		}
	}
}

// "kadi demo -h" says what the demo does without --data-dir, not the
// kadi-data that serve defaults to.
func TestDemoHelpSaysWhereItsDataGoes(t *testing.T) {
	var stdout, stderr syncBuffer
	if err := run(context.Background(), []string{"demo", "-h"}, &stdout, &stderr); err != flag.ErrHelp {
		t.Fatalf("demo -h: %v", err)
	}
	help := stderr.String()
	if !strings.Contains(help, "removed when the demo stops") || strings.Contains(help, `(default "kadi-data")`) {
		t.Errorf("demo -h:\n%s", help)
	}
}
