package e2e

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A stranger's mistakes on the command line: each one exits 2 and says on
// stderr what is wrong and how the command is used, never nothing.
func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	tests := []struct {
		args []string
		want []string // on stderr
	}{
		{[]string{"merchant", "create", "--data-dir", dir}, []string{"--name is required", "usage: kadi merchant create"}},
		{[]string{"ipn", "replay"}, []string{"IPN event id", "usage: kadi ipn replay ID"}},
		{[]string{"ipn", "show", "--data-dir", dir}, []string{"IPN event id", "usage: kadi ipn show ID"}},
		{[]string{"merchant", "set-ipn", "--mode", "prod"}, []string{`"prod"`, "test or live", "usage: kadi merchant set-ipn"}},
		{[]string{"merchant", "set-ipn", "--data-dir", dir, "--merchant", "1234567890", "--mode", "live", "--url", "http://shop.example/ipn", "--username", "u", "--password", "p"},
			[]string{"https", "usage: kadi merchant set-ipn"}},
		{[]string{"merchant", "rotate-key", "--mode", "test"}, []string{"--merchant is required", "usage: kadi merchant rotate-key"}},
		{[]string{"merchant", "rotate-secret", "--merchant", "1234567890", "--mode", "test", "--overlap", "-1h"},
			[]string{"--overlap -1h0m0s: give 0, or a time from 1m to 168h0m0s", "usage: kadi merchant rotate-secret"}},
		{[]string{"merchant", "rotate-secret", "--merchant", "1234567890", "--mode", "test", "--overlap", "500ms"},
			[]string{"--overlap 500ms: give 0, or a time from 1m", "usage: kadi merchant rotate-secret"}},
		{[]string{"merchant", "end-secret-overlap", "--merchant", "1234567890"}, []string{"test or live", "usage: kadi merchant end-secret-overlap"}},
		{[]string{"merchant", "set-ipn", "--nat64-prefixes", "fe80::/64"}, []string{"overlaps loopback, link-local", "usage: kadi merchant set-ipn"}},
		{[]string{"ipn", "list"}, []string{"--merchant is required", "usage: kadi ipn list"}},
		{[]string{"merchant", "show"}, []string{"--merchant is required", "usage: kadi merchant show"}},
		{[]string{"merchant", "list", "--limit", "0"}, []string{"--limit must be at least 1", "usage: kadi merchant list"}},
		{[]string{"merchant", "create", "--bogus"}, []string{"-bogus", "usage: kadi merchant create", "-name"}},
		{[]string{"serve", "stray"}, []string{"unexpected arguments: stray", "usage: kadi serve"}},
		{[]string{"version", "stray"}, []string{"unexpected arguments: stray", "usage: kadi version"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "kadi serve"}},
		{[]string{"help", "frobnicate"}, []string{`unknown command "frobnicate"`, "kadi serve"}},
		{[]string{}, []string{"Usage:", "kadi merchant create"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, err := runKadi(t, tt.args...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2\nstderr: %s", err, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(stderr), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if len(stdout) != 0 {
				t.Errorf("a usage error printed on stdout: %s", stdout)
			}
		})
	}
}

// kadi version and --version name the build; -h says what it does.
func TestCLIVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		stdout, stderr, err := runKadi(t, arg)
		if err != nil || !strings.HasPrefix(string(stdout), "kadi ") || !strings.Contains(string(stdout), "go1.") {
			t.Errorf("kadi %s: %v, %q (stderr %q)", arg, err, stdout, stderr)
		}
	}
	// "kadi help COMMAND" is COMMAND's -h: it printed the top-level usage.
	for _, args := range [][]string{{"help", "serve"}, {"help", "merchant", "create"}} {
		want := "usage: kadi " + strings.Join(args[1:], " ")
		stdout, stderr, err := runKadi(t, args...)
		if err != nil || !strings.HasPrefix(string(stdout)+string(stderr), want) {
			t.Errorf("kadi %s: %v, %q (stderr %q), want %q", strings.Join(args, " "), err, stdout, stderr, want)
		}
	}
	if stdout, _, err := runKadi(t, "version", "-h"); err != nil || !strings.HasPrefix(string(stdout), "usage: kadi version") {
		t.Errorf("kadi version -h: %v, %q, want its usage", err, stdout)
	}
}

// A first run's rough edges: a mistyped --data-dir fails and leaves nothing
// behind; merchant create says where it stored the merchant; a test-mode
// IPN URL the gateway will refuse is flagged at once.
func TestCLIFirstRun(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	typo := filepath.Join(base, "typo")
	for _, args := range [][]string{
		{"ipn", "list", "--data-dir", typo, "--merchant", "1234567890"},
		{"ipn", "show", "msg_000000000000000000000000", "--data-dir", typo},
		{"ipn", "replay", "msg_000000000000000000000000", "--data-dir", typo},
		{"merchant", "rotate-key", "--data-dir", typo, "--merchant", "1234567890", "--mode", "test"},
		{"merchant", "rotate-secret", "--data-dir", typo, "--merchant", "1234567890", "--mode", "test"},
		{"merchant", "end-secret-overlap", "--data-dir", typo, "--merchant", "1234567890", "--mode", "test"},
		{"merchant", "set-ipn", "--data-dir", typo, "--merchant", "1234567890", "--mode", "test", "--url", "https://shop.example/ipn", "--username", "u", "--password", "p"},
	} {
		_, stderr, err := runKadi(t, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(stderr), "no Kadi database in "+typo) {
			t.Errorf("%s: %v\n%s", strings.Join(args[:2], " "), err, stderr)
		}
		if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s created %s", strings.Join(args[:2], " "), typo)
		}
	}

	dir := filepath.Join(base, "data")
	stdout, stderr, err := runKadi(t, "merchant", "create", "--data-dir", dir, "--name", "Duka Letu")
	if err != nil || !strings.Contains(string(stdout), "created in "+filepath.Join(dir, "kadi.db")) {
		t.Fatalf("merchant create: %v\n%s%s", err, stdout, stderr)
	}
	m := createMerchant(t, dir, "Second Shop")
	for _, tt := range []struct {
		url  string
		warn bool
	}{{"http://127.0.0.1:9000/ipn", true}, {"http://10.1.2.3/ipn", true}, {"https://93.184.216.34/ipn", false}} {
		_, stderr, err := runKadi(t, "merchant", "set-ipn", "--data-dir", dir, "--merchant", m.MerchantCode, "--mode", "test",
			"--url", tt.url, "--username", "u", "--password", "p")
		warned := strings.Contains(string(stderr), "--allow-private-ipn")
		if err != nil || warned != tt.warn {
			t.Errorf("set-ipn %s: %v, warned %t, want %t\n%s", tt.url, err, warned, tt.warn, stderr)
		}
	}
}

// kadi serve says in one plain line, besides its JSON log, when it is
// ready, where, and on which store.
func TestServeSaysWhenReady(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	want := "Kadi is ready: API, hosted form, dashboard, /metrics (to 127.0.0.0/8,::1/128) on " + g.BaseURL + "; SQLite in " + g.DataDir
	if !strings.Contains(string(g.Stdout()), want) {
		t.Errorf("no %q on stdout:\n%s", want, g.Stdout())
	}
	// Ready means ready: the store, its schema and the IPN worker, which
	// starts beside the listener; an orchestrator polls until it says so.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(g.BaseURL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && string(body) == `{"status":"ready"}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 5 s after the ready line: %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
