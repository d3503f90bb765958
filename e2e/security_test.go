package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A login storm against the real binary: 120 parallel wrong passwords with
// a genuine API key, alternating the two token endpoints. Every guess is
// counted before it is hashed, so at most 10 reach argon2id (each such
// answer is invalid_grant; the rest are 429 or 503), and the process's
// peak memory stays far from the 1.86 GB that 100 parallel hashes took.
func TestLoginStormIsCountedAndSmall(t *testing.T) {
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Storm Shop") })

	t.Logf("peak RSS before the storm: %d MiB", peakRSS(t, g.cmd.Process.Pid)>>20)
	const n = 120
	codes := make([]int, n)
	bodies := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			path, form := "/identity/v2/token", url.Values{"username": {m.Username}, "password": {"wrong-password-1"}}
			if i%2 == 1 {
				path, form = "/token", url.Values{"merchantCode": {m.MerchantCode}, "password": {"wrong-password-1"}, "grant_type": {"password"}}
			}
			req, _ := http.NewRequest(http.MethodPost, g.BaseURL+path, strings.NewReader(form.Encode()))
			req.Header.Set("Authorization", "Basic "+m.Test.APIKey)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("guess %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var sb strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
			codes[i], bodies[i] = resp.StatusCode, sb.String()
		})
	}
	close(start)
	wg.Wait()

	checked := 0
	for i, code := range codes {
		switch {
		case strings.Contains(bodies[i], `"invalid_grant"`):
			checked++
		case code == http.StatusTooManyRequests, code == http.StatusServiceUnavailable:
		default:
			t.Errorf("guess %d: %d %s", i, code, bodies[i])
		}
	}
	if checked > 10 {
		t.Errorf("%d of %d parallel guesses had their password checked, want at most 10", checked, n)
	}
	peak := peakRSS(t, g.cmd.Process.Pid)
	t.Logf("%d passwords checked; peak RSS %d MiB", checked, peak>>20)
	if peak > 150<<20 {
		t.Errorf("peak RSS %d MiB under the storm, want at most 150 MiB", peak>>20)
	}

	// The merchant is locked now, even for the right password.
	form := url.Values{"username": {m.Username}, "password": {m.Password}}
	req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/identity/v2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "Basic "+m.Test.APIKey)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("right password after the storm: %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// peakRSS reads a process's high-water resident set size from Linux's
// /proc (VmHWM), in bytes.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read memory from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// kadi serve on a data dir that already exists with 0755: every file it
// writes there is 0600 all the same, and it warns about the dir.
func TestDataFilesArePrivateInASharedDir(t *testing.T) {
	var m merchantCreds
	g := startGateway(t, func(dir string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m = createMerchant(t, dir, "Private Shop")
	})
	s := newShopper(t, g, m)
	s.createBill(t, "PRIVATE1", "10.00") // a write through the server
	entries, err := os.ReadDir(g.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %04o, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	if len(entries) < 3 {
		t.Errorf("only %d files in the data dir to check", len(entries))
	}
	if !strings.Contains(string(g.Logs()), "chmod 700 "+g.DataDir) {
		t.Errorf("no warning about the 0755 data dir:\n%s", tail(g.Logs(), 10))
	}
}

// /metrics beside the API answers only the peers --metrics-allow names:
// with 10.0.0.0/8, a scrape from loopback meets the 404 of an unknown path
// while the gateway itself is healthy; with the default, loopback reads it.
func TestMetricsAllowOnTheRealBinary(t *testing.T) {
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
		return resp.StatusCode, sb.String()
	}
	closed := startGateway(t, nil, "--metrics-allow", "10.0.0.0/8")
	if code, _ := get(closed.BaseURL + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	if code, body := get(closed.BaseURL + "/metrics"); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Errorf("/metrics from loopback with --metrics-allow 10.0.0.0/8: %d %s", code, body)
	}
	open := startGateway(t, nil)
	if code, body := get(open.BaseURL + "/metrics"); code != http.StatusOK || !strings.Contains(body, "kadi_ipn_queue_depth") {
		t.Errorf("/metrics from loopback by default: %d %s", code, body)
	}
}
