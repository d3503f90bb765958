package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// revocationBound is how long a rotated key's tokens may keep working on a
// node: revocations refresh about every second, so this leaves a wide margin
// for a loaded machine while still catching a node that never refreshes.
const revocationBound = 15 * time.Second

// TestCLIWhileServing runs the merchant CLI against the data dir of a
// running gateway that is busy writing bills, as operators do (issue: "The
// CLI works while the server runs on the same data dir").
func TestCLIWhileServing(t *testing.T) {
	t.Parallel()
	var first merchantCreds
	g := startGateway(t, func(dir string) { first = createMerchant(t, dir, "Busy Shop") })
	busy := newShopper(t, g, first)
	ctx := context.Background()

	// Keep the database busy with writes for the whole test, so the CLI
	// meets real contention on the SQLite file.
	// Paced, so parallel tests on a small machine keep their CPU.
	load := startBillLoad(t, busy, "LOAD", "5.00", 5*time.Millisecond)

	second := createMerchant(t, g.DataDir, "Second Shop")
	if second.MerchantCode == first.MerchantCode {
		t.Fatal("two merchants got the same code")
	}
	// The running gateway sees the merchant the CLI wrote.
	shop2 := newShopper(t, g, second)
	shop2.createBill(t, "SECOND1", "20.00")
	oldToken, err := shop2.c.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, err := runKadi(t, "merchant", "rotate-key", "--data-dir", g.DataDir,
		"--merchant", second.MerchantCode, "--mode", "test", "--json")
	if err != nil {
		t.Fatalf("kadi merchant rotate-key: %v\nstderr: %s", err, errOut)
	}
	if bytes.Contains(errOut, []byte("database is locked")) {
		t.Fatalf("kadi merchant rotate-key met a locked database: %s", errOut)
	}
	var rotated struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(out, &rotated); err != nil || rotated.APIKey == "" {
		t.Fatalf("rotate-key --json printed %q (%v), want {\"apiKey\": …}", out, err)
	}
	if rotated.APIKey == second.Test.APIKey {
		t.Fatal("rotate-key printed the old key")
	}

	t.Run("old key refused for new tokens at once", func(t *testing.T) {
		_, err := g.clientWithKey(t, second, second.Test.APIKey).Token(ctx)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_client" {
			t.Fatalf("token with the rotated-out key: %v, want HTTP 401 invalid_client", err)
		}
	})

	t.Run("new key gets a working token", func(t *testing.T) {
		c := g.clientWithKey(t, second, rotated.APIKey)
		fresh := &shopper{g: g, m: second, c: c, callback: shop2.callback}
		fresh.createBill(t, "SECOND2", "20.00")
	})

	t.Run("old token revoked within the refresh interval", func(t *testing.T) {
		deadline := time.Now().Add(revocationBound)
		for i := 0; ; i++ {
			body := fmt.Sprintf(`{"customer":{"name":"Wanjiku Kamau"},"order":{"billerCode":%q,"reference":"OLDTOKEN%d",`+
				`"amount":"1.00","currency":"KES","description":"Old token","channel":"CARD","outlet":%q}}`,
				second.BillerCode, i, second.OutletCode)
			resp := bearerRequest(t, http.MethodPost, g.BaseURL+"/payment/v2/bills", oldToken, body)
			if resp.StatusCode == http.StatusUnauthorized {
				if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, "Bearer") || !strings.Contains(h, "invalid_token") {
					t.Errorf("401 for the old token has WWW-Authenticate %q, want Bearer error=\"invalid_token\"", h)
				}
				break
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("old token before revocation: HTTP %d, want 200 or 401", resp.StatusCode)
			}
			if time.Now().After(deadline) {
				t.Fatalf("a token of the rotated-out key still creates bills %s after the rotation", revocationBound)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Every other use of the old token is refused too: verification and
		// the hosted form.
		if resp := bearerRequest(t, http.MethodGet, g.BaseURL+"/payment/v2/query?billReference=SECOND1", oldToken, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("verify with the old token: HTTP %d, want 401", resp.StatusCode)
		}
		b := shop2.createBillWith(t, rotated.APIKey, "SECOND3")
		form := shop2.paymentForm(t, b, testCard("4242424242424242"))
		form.Token = oldToken
		if p := shop2.submit(t, form); p.Status != http.StatusUnauthorized || p.hasForm("/callback") {
			t.Errorf("hosted form with the old token: HTTP %d, want 401 on the gateway's own error page", p.Status)
		}
	})

	t.Run("other merchant unaffected", func(t *testing.T) {
		busy.createBill(t, "BUSYAFTER", "3.00")
	})

	if err := load.Stop(); err != nil {
		t.Fatalf("bill writes failed while the CLI ran: %v", err)
	}
	written := len(load.Acked())
	if written == 0 {
		t.Fatal("no bill was written while the CLI ran: the contention this test needs never happened")
	}
	t.Logf("%d bills written concurrently with the CLI", written)
	for _, bad := range []string{"database is locked", "SQLITE_BUSY"} {
		if bytes.Contains(g.Logs(), []byte(bad)) {
			t.Errorf("server log mentions %q", bad)
		}
	}
}

type rawResponse struct {
	StatusCode int
	Header     http.Header
}

// bearerRequest sends one API request with a given token, without the
// client's retry with a fresh token, so the test sees exactly what the
// gateway says about that token.
func bearerRequest(t testing.TB, method, target, token, body string) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := browserless.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	resp.Body.Close()
	return rawResponse{resp.StatusCode, resp.Header}
}

// createBillWith creates a bill through a client holding apiKey.
func (s *shopper) createBillWith(t testing.TB, apiKey, orderRef string) *client.Bill {
	t.Helper()
	c := s.g.clientWithKey(t, s.m, apiKey)
	b, err := c.CreateBill(context.Background(), s.billRequest(orderRef, "20.00"))
	if err != nil {
		t.Fatalf("CreateBill %s: %v", orderRef, err)
	}
	return b
}

// kadi merchant reset-access, while the gateway serves: the password it
// prints gets tokens (within the merchant cache's second), the old one
// no longer does, and the dashboard takes the new one.
func TestCLIResetAccess(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Forgetful Shop") })
	out, errOut, err := runKadi(t, "merchant", "reset-access", "--data-dir", g.DataDir, "--merchant", m.MerchantCode, "--password", "--json")
	var reset struct {
		Password   string `json:"password"`
		TwoStepOff bool   `json:"twoStepOff"`
	}
	if err != nil || json.Unmarshal(out, &reset) != nil || reset.Password == "" || reset.Password == m.Password || reset.TwoStepOff {
		t.Fatalf("kadi merchant reset-access --password --json: %v, %q\nstderr: %s", err, out, errOut)
	}
	ctx := context.Background()
	old := m
	fresh := m
	fresh.Password = reset.Password
	waitFor(t, "the new password to get a token", func() bool {
		_, err := g.Client(t, fresh).Token(ctx)
		return err == nil
	})
	if _, err := g.Client(t, old).Token(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("the old password after the reset: %v, want refused", err)
	}
	resp, err := browserless.PostForm(g.BaseURL+"/dashboard/sign-in", url.Values{"username": {m.MerchantCode}, "password": {reset.Password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("dashboard sign-in with the new password: HTTP %d", resp.StatusCode)
	}
}

// kadi merchant set-callbacks, while the gateway serves: within a second
// a form naming another origin is refused on the gateway's own page, and
// one naming the registered origin pays.
func TestCLISetCallbacks(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Origin Shop") })
	s := newShopper(t, g, m)
	origin := strings.TrimSuffix(s.callback.CallbackURL(), "/callback")
	out, errOut, err := runKadi(t, "merchant", "set-callbacks", "--data-dir", g.DataDir, "--merchant", m.MerchantCode, "--mode", "test", "--origins", origin)
	if err != nil || !strings.Contains(string(out), "go back only to "+origin) {
		t.Fatalf("kadi merchant set-callbacks: %v, %s\nstderr: %s", err, out, errOut)
	}
	var refused page
	waitFor(t, "a form to another origin to be refused", func() bool {
		b := s.createBill(t, fmt.Sprintf("ELSEWHERE%d", time.Now().UnixNano()%1e9), "5.00")
		f := s.paymentForm(t, b, testCard("4242424242424242"))
		f.CallbackURL = "http://127.0.0.1:9/elsewhere"
		refused = s.submit(t, f)
		return refused.Status == http.StatusBadRequest
	})
	if !strings.Contains(refused.Body, "not one of the callback origins") {
		t.Errorf("the refusal does not say why:\n%s", refused.Body)
	}
	b := s.createBill(t, "HOME1", "5.00")
	if cb := s.callback.follow(t, s.submit(t, s.paymentForm(t, b, testCard("4242424242424242")))); !cb.Successful() {
		t.Errorf("a form to the registered origin: %+v", cb)
	}
}

// kadi merchant list and show, as an operator finding a merchant: every
// merchant listed a page at a time, one shown with its set-up per mode,
// never a secret, a password or a whole key.
func TestCLIListAndShowMerchants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := createMerchant(t, dir, "Duka la Mama"), createMerchant(t, dir, "Coffee Roasters Ltd")
	if out, errOut, err := runKadi(t, "merchant", "set-callbacks", "--data-dir", dir, "--merchant", a.MerchantCode, "--mode", "live", "--origins", "https://shop.example"); err != nil {
		t.Fatalf("set-callbacks: %v %s %s", err, out, errOut)
	}
	setTestIPN(t, []string{"--data-dir", dir}, a.MerchantCode, "https://shop.example/ipn", "shop", "ipn-password-1")

	var codes []string
	for after := ""; ; {
		out, errOut, err := runKadi(t, "merchant", "list", "--data-dir", dir, "--limit", "1", "--after", after, "--json")
		if err != nil {
			t.Fatalf("merchant list: %v %s", err, errOut)
		}
		var page []struct {
			Code string `json:"merchantCode"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(out, &page); err != nil {
			t.Fatalf("merchant list --json: %v: %s", err, out)
		}
		if len(page) == 0 {
			break
		}
		codes, after = append(codes, page[0].Code), page[0].Code
	}
	if want := []string{min(a.MerchantCode, b.MerchantCode), max(a.MerchantCode, b.MerchantCode)}; strings.Join(codes, " ") != strings.Join(want, " ") {
		t.Errorf("listed %v, want %v", codes, want)
	}
	table, _, err := runKadi(t, "merchant", "list", "--data-dir", dir)
	if err != nil || !strings.Contains(string(table), "Coffee Roasters Ltd") || !strings.Contains(string(table), "Duka la Mama") {
		t.Errorf("merchant list: %v\n%s", err, table)
	}

	out, errOut, err := runKadi(t, "merchant", "show", "--data-dir", dir, "--merchant", a.MerchantCode, "--json")
	if err != nil {
		t.Fatalf("merchant show: %v %s", err, errOut)
	}
	var shown struct {
		Name    string `json:"name"`
		TwoStep *bool  `json:"twoStepVerification"`
		Modes   map[string]struct {
			APIKeyPrefix    string   `json:"apiKeyPrefix"`
			IPNURL          string   `json:"ipnUrl"`
			IPNUsername     string   `json:"ipnUsername"`
			CallbackOrigins []string `json:"callbackOrigins"`
		} `json:"modes"`
	}
	if err := json.Unmarshal(out, &shown); err != nil {
		t.Fatalf("merchant show --json: %v: %s", err, out)
	}
	test, live := shown.Modes["test"], shown.Modes["live"]
	if shown.Name != "Duka la Mama" || shown.TwoStep == nil || *shown.TwoStep || test.IPNURL != "https://shop.example/ipn" || test.IPNUsername != "shop" ||
		len(test.CallbackOrigins) != 0 || strings.Join(live.CallbackOrigins, " ") != "https://shop.example" ||
		!strings.HasPrefix(a.Test.APIKey, test.APIKeyPrefix) || !strings.HasPrefix(a.Live.APIKey, live.APIKeyPrefix) || len(test.APIKeyPrefix) < 12 {
		t.Errorf("merchant show: %s", out)
	}
	human, _, err := runKadi(t, "merchant", "show", "--data-dir", dir, "--merchant", a.MerchantCode)
	if err != nil || !strings.Contains(string(human), "https://shop.example/ipn") || !strings.Contains(string(human), "any (none registered)") {
		t.Errorf("merchant show: %v\n%s", err, human)
	}
	for _, secret := range []string{a.Password, a.Test.APIKey, a.Live.APIKey, a.Test.NotificationSecret, a.Live.NotificationSecret, "ipn-password-1"} {
		if strings.Contains(string(out), secret) || strings.Contains(string(human), secret) || strings.Contains(string(table), secret) {
			t.Errorf("a secret was printed: %.12s…", secret)
		}
	}
	if _, errOut, err := runKadi(t, "merchant", "show", "--data-dir", dir, "--merchant", "0000000000"); err == nil || !strings.Contains(string(errOut), "no merchant 0000000000") {
		t.Errorf("merchant show of no such merchant: %v %s", err, errOut)
	}
}

// An operator replaces a merchant's notification secret from the CLI while
// the gateway runs: the next notifications carry both signatures, each
// checking with its own secret, so the receiver refuses none while it takes
// the new one; once the CLI ends the overlap, only the new secret's.
func TestRotateNotificationSecretFromTheCLI(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 64)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	var m merchantCreds
	g := startGateway(t, func(dir string) {
		m = createMerchant(t, dir, "Rotating Shop")
		setTestIPN(t, []string{"--data-dir", dir}, m.MerchantCode, receiver.URL+"/ipn", "shop-ipn", "ipn-s3cret")
	}, "--allow-private-ipn")
	shop := newShopper(t, g, m)
	checksWith := func(secret string, d delivery) bool {
		h, err := client.NewIPNHandler(client.IPNConfig{Secret: secret, Username: "shop-ipn", Password: "ipn-s3cret"},
			func(context.Context, client.Notification) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Verify(d.header, d.body)
		return err == nil
	}
	paid := 0
	pay := func() delivery {
		paid++
		b := shop.createBill(t, fmt.Sprintf("ROTATE%d", paid), "10.00")
		if cb := shop.callback.follow(t, shop.submit(t, shop.paymentForm(t, b, testCard("4242424242424242")))); !cb.Successful() {
			t.Fatalf("payment %d not approved", paid)
		}
		select {
		case d := <-got:
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("no notification for payment %d", paid)
			return delivery{}
		}
	}

	out, errOut, err := runKadi(t, "merchant", "rotate-secret", "--data-dir", g.DataDir, "--merchant", m.MerchantCode, "--mode", "test", "--overlap", "1h", "--json")
	if err != nil {
		t.Fatalf("kadi merchant rotate-secret: %v\nstderr: %s", err, errOut)
	}
	var rotated struct {
		Secret string    `json:"notificationSecret"`
		Until  time.Time `json:"previousSecretSignsUntil"`
	}
	if err := json.Unmarshal(out, &rotated); err != nil || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == m.Test.NotificationSecret ||
		rotated.Until.Before(time.Now().Add(59*time.Minute)) || rotated.Until.After(time.Now().Add(time.Hour)) {
		t.Fatalf("rotate-secret --json printed %q (%v)", out, err)
	}
	shownUntil := func() time.Time {
		out, errOut, err := runKadi(t, "merchant", "show", "--data-dir", g.DataDir, "--merchant", m.MerchantCode, "--json")
		var shown struct {
			Modes map[string]struct {
				Until time.Time `json:"previousSecretSignsUntil"`
			} `json:"modes"`
		}
		if err != nil || json.Unmarshal(out, &shown) != nil {
			t.Fatalf("kadi merchant show --json: %v\n%s%s", err, out, errOut)
		}
		return shown.Modes["test"].Until
	}
	if until := shownUntil(); !until.Equal(rotated.Until) {
		t.Errorf("merchant show says the replaced secret signs until %s, want %s", until, rotated.Until)
	}
	// Settings reach the running gateway within a second.
	deadline := time.Now().Add(revocationBound)
	for d := pay(); !checksWith(rotated.Secret, d); d = pay() {
		if time.Now().After(deadline) {
			t.Fatalf("notifications still not signed with the new secret %s after the rotation", revocationBound)
		}
	}
	if d := pay(); !checksWith(rotated.Secret, d) || !checksWith(m.Test.NotificationSecret, d) {
		t.Errorf("a notification during the overlap: checks with the new secret %t, the old %t; want both (signatures %q)",
			checksWith(rotated.Secret, d), checksWith(m.Test.NotificationSecret, d), d.header.Get("webhook-signature"))
	}

	if out, errOut, err := runKadi(t, "merchant", "end-secret-overlap", "--data-dir", g.DataDir, "--merchant", m.MerchantCode, "--mode", "test"); err != nil ||
		!strings.Contains(string(out), "no longer signs") {
		t.Fatalf("kadi merchant end-secret-overlap: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if until := shownUntil(); !until.IsZero() {
		t.Errorf("merchant show says the replaced secret signs until %s after the overlap was ended", until)
	}
	deadline = time.Now().Add(revocationBound)
	for d := pay(); checksWith(m.Test.NotificationSecret, d); d = pay() {
		if time.Now().After(deadline) {
			t.Fatalf("the replaced secret still signs %s after the overlap was ended", revocationBound)
		}
	}
	if d := pay(); !checksWith(rotated.Secret, d) || checksWith(m.Test.NotificationSecret, d) {
		t.Errorf("a notification after the overlap: checks with the new secret %t, the old %t; want the new only",
			checksWith(rotated.Secret, d), checksWith(m.Test.NotificationSecret, d))
	}
	if out, _, err := runKadi(t, "merchant", "end-secret-overlap", "--data-dir", g.DataDir, "--merchant", m.MerchantCode, "--mode", "test"); err != nil ||
		!strings.Contains(string(out), "nothing changed") {
		t.Errorf("ending it again: %v, %s", err, out)
	}
}

// SIGHUP (a closed terminal, a logrotate's "kill -HUP") stops kadi serve
// as SIGTERM does, draining what is in flight: it ended the process at
// once, exit 129, with no word in the log (an operator's sweep).
func TestHangUpStopsGracefully(t *testing.T) {
	g := startGateway(t, nil)
	g.StopWith(syscall.SIGHUP)
	if !bytes.Contains(g.Logs(), []byte("stopped: every request answered")) {
		t.Errorf("no drain after SIGHUP; log:\n%s", tail(g.Logs(), 20))
	}
}

// Started with SIGHUP ignored (nohup kadi serve &), it keeps ignoring it:
// watching the signal would have taken the ignore back, and the node
// stopped as its terminal closed.
func TestHangUpIgnoredUnderNohup(t *testing.T) {
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup here")
	}
	addr := "127.0.0.1:" + freePort(t)
	cmd := exec.Command(nohup, kadiBin, "serve", "--data-dir", filepath.Join(t.TempDir(), "data"), "--addr", addr)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	healthy := func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(30 * time.Second); !healthy(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("kadi serve under nohup never answered")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("under nohup, SIGHUP stopped kadi serve: %v\n%s", err, logs.String())
	case <-time.After(2 * time.Second):
	}
	if !healthy() {
		t.Error("under nohup, kadi serve stopped answering after SIGHUP")
	}
}

// A second kadi serve on a data dir already served is refused, saying
// by whom: both ran, each with its own notification worker and
// reconciler (an operator's sweep). The first serves on.
func TestSecondServeOnADataDirIsRefused(t *testing.T) {
	g := startGateway(t, nil)
	out, errOut, err := runKadi(t, "serve", "--data-dir", g.DataDir, "--addr", "127.0.0.1:"+freePort(t))
	if err == nil || !strings.Contains(string(errOut), "another kadi serve (pid ") || !strings.Contains(string(errOut), "is serving from the data directory "+g.DataDir) {
		t.Errorf("a second kadi serve on %s: %v\n%s%s", g.DataDir, err, out, errOut)
	}
	// kadi demo too, before it puts its merchant in the served store.
	out, errOut, err = runKadi(t, "demo", "--data-dir", g.DataDir, "--addr", "127.0.0.1:"+freePort(t), "--shop-addr", "127.0.0.1:"+freePort(t))
	if err == nil || !strings.Contains(string(errOut), "another kadi serve (pid ") {
		t.Errorf("kadi demo on %s: %v\n%s%s", g.DataDir, err, out, errOut)
	}
	if list, _, err := runKadi(t, "merchant", "list", "--data-dir", g.DataDir); err != nil || strings.Contains(string(list), "Kadi Demo Coffee") {
		t.Errorf("the refused demo changed the served store: %v\n%s", err, list)
	}
	if resp, err := http.Get(g.BaseURL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the first node after the refusals: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	g.Stop()
	g.Start() // the lock went with the process
}
