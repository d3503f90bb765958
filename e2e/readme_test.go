package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeWalkthrough runs every command of the README's walkthrough,
// exactly as printed, in a fresh directory: a README that does not work as
// printed fails here. Only two things change: the port (a free one instead
// of 8080) and `go build`, which copies the binary this suite built from
// the same source.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: .ci/run installs it", tool)
			}
			t.Skipf("%s is missing", tool)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := walkthrough(t, string(readme))
	port := freePort(t)
	script = strings.ReplaceAll(script, "127.0.0.1:8080", "127.0.0.1:"+port)

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shim := `go() { if [ "$*" = "build -o kadi ./cmd/kadi" ]; then cp "$KADI_BIN" kadi; else command go "$@"; fi; }` + "\n"
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", shim+script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KADI_BIN="+kadiBin)
	// Its own process group, so the gateway it starts in the background
	// goes too, whatever the script did.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A step that fails leaves the backgrounded gateway holding the
	// output pipe: kill the whole group, and stop waiting for the pipe, so
	// a broken walkthrough fails instead of hanging.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	if err == nil {
		defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = cmd.Wait()
		if err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\nscript:\n%s\noutput:\n%s", err, script, out.String())
	}
	got := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`bill [A-Z0-9]{12}\n`),
		regexp.MustCompile(`name="orderStatus" value="Transaction Successfull"`),
		regexp.MustCompile(`"status": true`),
		regexp.MustCompile(`"orderRef": "ORD1001"`),
	} {
		if !want.MatchString(got) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, got)
		}
	}
	// The walkthrough left what .gitignore keeps out of git, and no more.
	for _, name := range []string{"merchant.json", "kadi-data", "kadi"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// And the gateway it started stops (it drains in-flight requests first).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Error("the walkthrough's gateway still listens 20 s after kill %1")
			break
		}
	}
}

// walkthrough returns the sh blocks of the README section that starts with
// "## The five steps", joined into one script.
func walkthrough(t *testing.T, readme string) string {
	t.Helper()
	start := strings.Index(readme, "\n## The five steps")
	if start < 0 {
		t.Fatal("README.md has no \"## The five steps\" section")
	}
	section := readme[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 6 {
		t.Fatalf("the walkthrough has %d sh blocks, want every step", len(blocks))
	}
	var sb strings.Builder
	for _, b := range blocks {
		sb.WriteString(b[1])
	}
	return sb.String()
}
