package e2e

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// besideCheckpoint is kadi-load's "beside checkpoint" figure: the share of
// commits a WAL checkpoint ran beside, and their p99's bucket if any.
var besideCheckpoint = regexp.MustCompile(`^\d+%(,(≤\S+|more))?$`)

// kadi-load, the benchmark of record, runs against the real binary as the
// docs say and prints every scenario with both baselines and the server's
// CPU time per request. Short: this checks it works, not how fast.
func TestKadiLoadRuns(t *testing.T) {
	t.Parallel()
	bin, credsFile, g := loadedGateway(t)
	out := runKadiLoad(t, bin, credsFile, g.BaseURL)
	checkLoadTable(t, out, true)
}

// loadedGateway builds kadi-load and starts a gateway (kadi serve with
// extra flags) with a merchant whose credentials are in credsFile.
func loadedGateway(t *testing.T, extra ...string) (bin, credsFile string, g *gateway) {
	t.Helper()
	dir := t.TempDir()
	bin = buildKadiLoad(t, dir)
	var m merchantCreds
	g = startGateway(t, func(d string) { m = createMerchant(t, d, "Load Shop") }, extra...)
	creds, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	credsFile = filepath.Join(dir, "merchant.json")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, credsFile, g
}

// buildKadiLoad builds kadi-load into dir.
func buildKadiLoad(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "kadi-load")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kadi-load").CombinedOutput(); err != nil {
		t.Fatalf("build kadi-load: %v\n%s", err, out)
	}
	return bin
}

// kadi-load run without what it needs says what is missing, and a
// credentials file given but not readable is named as such: it was told
// "--credentials FILE and an approving --card NUMBER are required".
func TestKadiLoadSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	bin := buildKadiLoad(t, t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "kadi-load: --credentials FILE and an approving --card NUMBER are required\n"},
		{[]string{"--credentials", "/nonexistent/merchant.json"}, "kadi-load: --credentials: open /nonexistent/merchant.json: no such file or directory\n"},
	} {
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, tc.args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || errOut.String() != tc.want || out.Len() != 0 {
			t.Errorf("kadi-load %v: %v, stderr %q, stdout %q; want exit 2 and %q", tc.args, err, errOut.String(), out.String(), tc.want)
		}
	}
}

// A gateway serving /metrics on its own listener (--metrics-addr, as
// operators run it) has the writer's counters there: kadi-load says so
// rather than print a table without them, and reads them with --metrics.
func TestKadiLoadMetricsElsewhere(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + freePort(t)
	bin, credsFile, g := loadedGateway(t, "--metrics-addr", metricsAddr)
	run := func(extra ...string) (billsRow []string, stderr string) {
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, append([]string{"--url", g.BaseURL, "--credentials", credsFile, "--card", "4242424242424242",
			"--duration", "1s", "--max-requests", "100", "--concurrency", "4", "--only", "bills$"}, extra...)...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("kadi-load %v: %v\n%s%s", extra, err, out.String(), errOut.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "POST /payment/v2/bills "); ok {
				billsRow = strings.Fields(rest)
			}
		}
		if len(billsRow) != 17 {
			t.Fatalf("kadi-load %v: no bills row in\n%s", extra, out.String())
		}
		return billsRow, errOut.String()
	}
	row, warned := run()
	if !strings.Contains(warned, "give --metrics") || row[8] != "—" {
		t.Errorf("without --metrics: warned %q, writes/commit %s; want a warning naming --metrics and no figure", warned, row[8])
	}
	if _, warned = run("--metrics", g.BaseURL+"/no-metrics-here"); !strings.Contains(warned, "check --metrics") {
		t.Errorf("with a wrong --metrics: warned %q; want it to say so", warned)
	}
	profile := filepath.Join(t.TempDir(), "load.pprof")
	row, warned = run("--metrics", "http://"+metricsAddr+"/metrics", "--cpuprofile", profile)
	checkProfile(t, profile)
	if warned != "" || row[8] == "—" || row[9] == "—" || row[10] == "—" || row[11] == "—" || !besideCheckpoint.MatchString(row[12]) {
		t.Errorf("with --metrics: warned %q, writes/commit %s, writer busy %s, commit p99 %s, wait p99 %s, beside checkpoint %s; want every figure",
			warned, row[8], row[9], row[10], row[11], row[12])
	}
}

// A run with failed requests says what the first of each scenario's was
// and exits 1: it printed a count and exited 0, and a declining --card
// was counted as approved checkouts.
func TestKadiLoadSaysWhatFailed(t *testing.T) {
	t.Parallel()
	bin, credsFile, g := loadedGateway(t)
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "--url", g.BaseURL, "--credentials", credsFile, "--card", "4000000000000002",
		"--duration", "1s", "--max-requests", "20", "--concurrency", "2", "--only", "cardPay")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("kadi-load with a declining card: %v, want exit 1", err)
	}
	if !strings.Contains(out.String(), "bill + POST /cardPay (approved): ") || !strings.Contains(out.String(), "errors; the first: GET /cardPay/page/") ||
		!strings.Contains(out.String(), "a declining --card?") {
		t.Errorf("kadi-load does not say what failed:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "requests failed") || !strings.Contains(errOut.String(), "not of record") {
		t.Errorf("kadi-load's last word: %q", errOut.String())
	}
}

// checkProfile fails t unless path holds what runtime/pprof writes: a
// gzip stream of a profile's protobuf, whole (its samples are not read).
func checkProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("--cpuprofile: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("--cpuprofile wrote no gzip stream: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || len(raw) < 100 {
		t.Fatalf("--cpuprofile: %d bytes of profile, %v; want a whole profile", len(raw), err)
	}
}

// TestKadiLoadTwoNodes runs kadi-load against two nodes sharing a
// PostgreSQL (--url A,B), as docs/performance.md reports them: every row
// without errors, both nodes serving, their CPU added up.
func TestKadiLoadTwoNodes(t *testing.T) {
	dbURL, _, key, m := clusterWithMerchant(t, "Load Cluster")
	out, err := json.Marshal(m) // as kadi merchant create --json printed it
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildKadiLoad(t, dir)
	credsFile := filepath.Join(dir, "merchant.json")
	if err := os.WriteFile(credsFile, out, 0o600); err != nil {
		t.Fatal(err)
	}
	a := clusterStartNode(t, "A", dbURL, key)
	b := clusterStartNode(t, "B", dbURL, key)
	checkLoadTable(t, runKadiLoad(t, bin, credsFile, a.base+","+b.base), false)
	for _, n := range []*clusterNode{a, b} {
		logs, _ := os.ReadFile(n.logPath)
		if c := bytes.Count(logs, []byte(`"path":"/payment/v2/bills","status":200`)); c == 0 {
			t.Errorf("node %s created no bill: the load did not spread", n.name)
		}
		if c := bytes.Count(logs, []byte(`"path":"/cardPay","status":303`)); c == 0 {
			t.Errorf("node %s took no payment", n.name)
		}
	}
}

func runKadiLoad(t *testing.T, bin, credsFile, urls string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	// No --card: checkouts pay with the simulated acquirer's approving
	// card, so that scripts/load names no card number.
	cmd := exec.Command(bin, "--url", urls, "--credentials", credsFile,
		"--duration", "2s", "--max-requests", "100", "--concurrency", "4")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kadi-load: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("\n%s", stdout.String())
	if stderr.Len() > 0 {
		t.Errorf("kadi-load warned: %s", stderr.String())
	}
	return stdout.String()
}

// checkLoadTable holds kadi-load's table to every scenario with both
// baselines, no errors, the server's CPU where it must show and, on
// SQLite, the group-commit writer's figures for the scenarios that write.
func checkLoadTable(t *testing.T, out string, sqlite bool) {
	t.Helper()
	half := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "bills at half the peak (") {
			half = line[strings.Index(line, ")")+1:]
		}
	}
	if f := strings.Fields(half); len(f) != 17 || f[0] == "0" || f[1] != "0" || f[16] != "—" {
		t.Errorf("the paced bills row: %q", half)
	}
	for _, scenario := range []string{"minimal net/http handler", "GET /healthz", "POST /payment/v2/bills",
		"GET /payment/v2/query (no such bill)", "GET /payment/v2/query (paid bill)", "bill + POST /cardPay (approved)"} {
		var row []string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, scenario+" ") {
				row = strings.Fields(strings.TrimPrefix(line, scenario))
			}
		}
		// ok, errors, per sec, p50, p99, vs minimal, vs /healthz, CPU/req,
		// writes/commit, writer busy, commit p99, wait p99, beside
		// checkpoint, peak RSS, load CPU/req, cores used, paired per sec
		if len(row) != 17 {
			t.Errorf("no row for %q", scenario)
			continue
		}
		// Every ratio is against the baseline run beside it.
		if n, err := strconv.ParseFloat(row[16], 64); err != nil || n <= 0 {
			t.Errorf("%s: paired baseline %q per second", scenario, row[16])
		}
		if row[0] == "0" || row[1] != "0" {
			t.Errorf("%s: %s ok, %s errors", scenario, row[0], row[1])
		}
		if !strings.HasSuffix(row[13], "MB") || row[13] == "0MB" {
			t.Errorf("%s: peak RSS %q", scenario, row[13])
		}
		// The gateway's CPU comes from /proc, in 10 ms ticks: a hundred
		// bills (about 12 ms) may round to none on a fast machine, a
		// hundred checkouts (about 100 ms) never do. kadi-load's own comes
		// from getrusage, to the microsecond.
		if strings.Contains(scenario, "cardPay") {
			if row[7] == "—" {
				t.Errorf("%s: no server CPU", scenario)
			}
			// The two together, in cores of this machine's.
			used, cores, ok := strings.Cut(row[15], "/")
			if n, err := strconv.ParseFloat(used, 64); !ok || err != nil || n <= 0 || cores != strconv.Itoa(runtime.NumCPU()) {
				t.Errorf("%s: cores used %q", scenario, row[15])
			}
		}
		if strings.Contains(scenario, "bills") || strings.Contains(scenario, "cardPay") {
			if row[14] == "—" {
				t.Errorf("%s: no load CPU", scenario)
			}
			writes := row[8] != "—" && row[9] != "—" && strings.HasPrefix(row[10], "≤") && strings.HasPrefix(row[11], "≤") && besideCheckpoint.MatchString(row[12])
			if writes != sqlite {
				t.Errorf("%s: writes per commit %s, writer busy %s, commit p99 %s, wait p99 %s, beside checkpoint %s (SQLite: %v)",
					scenario, row[8], row[9], row[10], row[11], row[12], sqlite)
			}
		}
	}
}

// kadi-load fills a data dir only while no node serves it: a node answers
// "no such bill" from the bills it listed at start and those it added
// since. A node started after the seeding finds the seeded bills.
func TestKadiLoadSeedsOnlyAnUnservedDataDir(t *testing.T) {
	t.Parallel()
	bin, credsFile, g := loadedGateway(t)
	seed := func() (string, error) {
		out, err := exec.Command(bin, "--seed-bills", "30", "--data-dir", g.DataDir, "--credentials", credsFile).CombinedOutput()
		return string(out), err
	}
	if out, err := seed(); err == nil || !strings.Contains(out, "another kadi serve") {
		t.Errorf("seeding a served data dir: %v, want it refused\n%s", err, out)
	}
	g.Stop()
	if out, err := seed(); err != nil {
		t.Fatalf("seeding a data dir nobody serves: %v\n%s", err, out)
	}
	g.Start()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.DataDir, "kadi.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seeded []string
	rows, err := db.Query(`SELECT order_ref FROM bills WHERE order_ref LIKE 'SEED%' ORDER BY order_ref`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			t.Fatal(err)
		}
		seeded = append(seeded, ref)
	}
	if err := rows.Close(); err != nil || len(seeded) != 30 {
		t.Fatalf("%d seeded bills, %v; want 30", len(seeded), err)
	}
	raw, err := os.ReadFile(credsFile)
	if err != nil {
		t.Fatal(err)
	}
	var m merchantCreds
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	c := g.Client(t, m)
	// Until the node has listed the stored bills it reads every query.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if listed := g.LogLines(); slices.ContainsFunc(listed, func(l logLine) bool { return l.Msg == "listed the stored bills" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not list the stored bills in 10 s:\n%s", tail(g.Logs(), 20))
		}
	}
	for _, ref := range seeded {
		if v, err := c.Verify(t.Context(), ref); err != nil || v.OrderRef != ref {
			t.Fatalf("query of seeded bill %s: %+v, %v", ref, v, err)
		}
	}
}
