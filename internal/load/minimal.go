package load

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The second baseline is the least a Go net/http server can do for a
// request: what /healthz costs beyond it is the gateway's own overhead
// (middleware, logging, the store's ping). It runs in a process of its own,
// as the gateway does, so both meet the load generator the same way.

// MinimalFlag makes kadi-load serve the minimal baseline instead: it is
// how Run starts it.
const MinimalFlag = "--minimal-server"

// ServeMinimal answers every request as /healthz does, with nothing else,
// on a loopback port it prints on stdout. It returns when the listener
// fails.
func ServeMinimal() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})}
	return srv.Serve(ln)
}

// startMinimal runs this executable with MinimalFlag and returns the
// server's URL, its pid and how to stop it.
func startMinimal() (string, int, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(exe, MinimalFlag)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("start the minimal server: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("the minimal server did not say where it listens: %w", err)
	}
	return "http://" + strings.TrimSpace(line), cmd.Process.Pid, stop, nil
}
