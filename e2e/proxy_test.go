package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// guessToken asks for a token with an API key that does not exist, as a
// request through a proxy that names the client in X-Forwarded-For.
func guessToken(t *testing.T, base, forwardedFor string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/identity/v2/token",
		strings.NewReader(url.Values{"username": {"4900000001"}, "password": {"wrong-password-1"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Basic kadi_test_no_such_key")
	req.Header.Set("X-Forwarded-For", forwardedFor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /identity/v2/token: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// docs/operations.md, Trusted proxies: with --trusted-proxies the address
// a proxy names is the one failures count against, so one client's guesses
// slow down that client only; without it the header is anyone's to write
// and is ignored.
func TestTrustedProxiesOnTheRealBinary(t *testing.T) {
	// Ten failures are free, then an address waits (docs/security.md).
	const free = 10

	t.Run("behind a trusted proxy, each client counts alone", func(t *testing.T) {
		g := startGateway(t, nil, "--trusted-proxies", "127.0.0.1/32")
		const guesser, bystander = "198.51.100.7", "2001:db8::42"
		throttled := false
		for i := 0; i < free+5 && !throttled; i++ {
			switch code := guessToken(t, g.BaseURL, "192.0.2.1, "+guesser); code {
			case http.StatusTooManyRequests:
				throttled = i > free-1
				if !throttled {
					t.Fatalf("guess %d already throttled", i+1)
				}
			case http.StatusUnauthorized:
			default:
				t.Fatalf("guess %d: %d", i+1, code)
			}
		}
		if !throttled {
			t.Fatalf("%d guesses from %s never throttled", free+5, guesser)
		}
		if code := guessToken(t, g.BaseURL, bystander); code != http.StatusUnauthorized {
			t.Errorf("another client behind the same proxy: %d, want 401 (not slowed by its neighbour)", code)
		}
		// The access log names the client and the proxy that vouched for it.
		var seen bool
		sc := bufio.NewScanner(bytes.NewReader(g.Logs()))
		for sc.Scan() {
			var l struct{ Msg, Path, Remote, Proxy string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "request" && l.Path == "/identity/v2/token" && l.Remote == bystander {
				seen = l.Proxy == "127.0.0.1"
			}
		}
		if !seen {
			t.Errorf("no access line with remote %s and proxy 127.0.0.1:\n%s", bystander, tail(g.Logs(), 5))
		}
	})

	t.Run("without --trusted-proxies the header is ignored", func(t *testing.T) {
		g := startGateway(t, nil)
		// Every guess names another client: all of them are the socket's
		// peer all the same, and it is throttled.
		for i := 0; ; i++ {
			code := guessToken(t, g.BaseURL, fmt.Sprintf("198.51.100.%d", i+1))
			if code == http.StatusTooManyRequests {
				if i < free {
					t.Fatalf("throttled after %d guesses, want %d free", i, free)
				}
				break
			}
			if code != http.StatusUnauthorized || i > free+5 {
				t.Fatalf("guess %d: %d; spoofed X-Forwarded-For spread the guesses over made-up addresses", i+1, code)
			}
		}
	})
}

// Mistakes in the new serve flags are usage errors that say what is wrong.
func TestServeProxyAndLogFlagMistakes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--log-format", "xml"}, `-log-format: must be json or text, not "xml"`},
		{[]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--trusted-proxies", "proxy.internal"}, "neither a CIDR prefix nor an IP address"},
	} {
		_, stderr, err := runKadi(t, tc.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(stderr), tc.want) || !strings.Contains(string(stderr), "usage: kadi serve") {
			t.Errorf("kadi %v: %v, stderr %s; want exit 2 saying %q", tc.args, err, stderr, tc.want)
		}
	}
}

// --log-format text on the real binary: key=value lines, though stderr is a
// file (where the default is JSON, which every other test reads).
func TestServeLogFormatText(t *testing.T) {
	g := startGateway(t, nil, "--log-format", "text")
	resp, err := http.Get(g.BaseURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	g.Stop()
	logs := string(g.Logs())
	if !strings.Contains(logs, "level=INFO msg=request ") || !strings.Contains(logs, "path=/healthz status=200") || strings.Contains(logs, `{"time"`) {
		t.Errorf("--log-format text wrote:\n%s", tail(g.Logs(), 10))
	}
}
