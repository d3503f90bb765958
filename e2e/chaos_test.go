package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

var chaosKills = flag.Int("chaos.kills", 12, "SIGKILLs TestChaos deals out across its nodes (the long run: 1000)")

// chaosOutageBound is how long any answer may take while PostgreSQL is
// down; chaosRecoveryBound how long after it is back every node serves.
const (
	chaosOutageBound   = 10 * time.Second
	chaosRecoveryBound = 15 * time.Second
)

// TestChaos runs two nodes on one PostgreSQL and one on SQLite under
// concurrent load (bills created on one node and paid on either, some
// paid twice at once), SIGKILLs nodes at random moments and restarts them,
// and once stops PostgreSQL itself (an immediate shutdown, as a crash). It
// asserts what a merchant relies on: no acknowledged bill or payment is
// lost, no bill is charged twice (by the gateway's payments and by the
// simulated acquirer's own ledger), every paid bill is notified, no answer
// is ever a 500, every answer during the outage is a 503 within a bound,
// and the nodes serve again within seconds of the database's return.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: not in -short")
	}
	pg := startPrivatePostgres(t)
	key := hex.EncodeToString(clusterRandom(t, 32))
	t.Setenv("KADI_SECRET_KEY", key)

	pgStore, sqStore := newChaosStore("postgres"), newChaosStore("sqlite")
	dbURL := pg.url
	pgStore.m = chaosMerchant(t, "--database-url", dbURL)
	dataDir := t.TempDir()
	sqStore.m = chaosMerchant(t, "--data-dir", dataDir)
	pgStore.rx = newClusterReceiver(t, pgStore.m.Test.NotificationSecret)
	sqStore.rx = newClusterReceiver(t, sqStore.m.Test.NotificationSecret)
	for _, s := range []struct {
		where []string
		st    *chaosStore
	}{{[]string{"--database-url", dbURL}, pgStore}, {[]string{"--data-dir", dataDir}, sqStore}} {
		setTestIPN(t, s.where, s.st.m.MerchantCode, s.st.rx.URL+"/ipn", clusterIPNUser, clusterIPNPassword)
	}

	pgStore.nodes = []*chaosNode{
		startChaosNode(t, "chaos-A", key, "--database-url", dbURL),
		startChaosNode(t, "chaos-B", key, "--database-url", dbURL),
	}
	sqStore.nodes = []*chaosNode{startChaosNode(t, "chaos-C", key, "--data-dir", dataDir)}
	all := append(slices.Clone(pgStore.nodes), sqStore.nodes...)
	for _, s := range []*chaosStore{pgStore, sqStore} {
		s.token = chaosToken(t, s.nodes[0].base(), s.m)
	}

	// Load until the kills are dealt.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range []*chaosStore{pgStore, sqStore} {
		for w := range 4 {
			wg.Go(func() { s.load(w, stop) })
		}
	}

	var outage chaosOutage
	kills := 0
	for kills < *chaosKills {
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		n := all[rand.IntN(len(all))]
		n.kill(t)
		n.start(t)
		kills++
		if kills == max(*chaosKills/2, 1) && outage.answers == 0 {
			outage = pgOutage(t, pg, pgStore)
		}
	}
	close(stop)
	wg.Wait()

	// Every node up: each settles what its earlier runs left at start.
	for _, s := range []*chaosStore{pgStore, sqStore} {
		s.check(t)
	}
	t.Logf("chaos: %d SIGKILLs; PostgreSQL stopped once: %d answers during the outage, all 503, slowest %s; every node serving %s after its return",
		kills, outage.answers, outage.slowest.Round(time.Millisecond), outage.recovery.Round(time.Millisecond))
	for _, s := range []*chaosStore{pgStore, sqStore} {
		t.Logf("chaos %s: %d bills and %d payments acknowledged, %d answers 503, %d connections cut by a kill",
			s.name, len(s.bills), len(s.paid), s.unavailable.Load(), s.cut.Load())
	}
}

// chaosStore is one database's share of the test: its merchant, nodes and
// receiver, and what its nodes acknowledged.
type chaosStore struct {
	name  string
	m     merchantCreds
	nodes []*chaosNode
	rx    *clusterReceiver
	token string

	mu       sync.Mutex
	bills    map[string]string // order reference → bill reference, as acknowledged
	paid     map[string]string // bill reference → transactionRef of an acknowledged success
	problems []string

	unavailable, cut atomic.Int64
}

func newChaosStore(name string) *chaosStore {
	return &chaosStore{name: name, bills: map[string]string{}, paid: map[string]string{}}
}

func (s *chaosStore) node() *chaosNode { return s.nodes[rand.IntN(len(s.nodes))] }

func (s *chaosStore) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// load creates bills and pays them, each step on a node picked at
// random, until stop. A tenth of the bills are submitted to two nodes at
// once, as a shopper double-clicking through a load balancer.
func (s *chaosStore) load(worker int, stop <-chan struct{}) {
	hc := &http.Client{Timeout: 60 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		ref := fmt.Sprintf("X%dN%d", worker, i)
		status, body, err := chaosBill(hc, s.node().base(), s.token, s.m, ref)
		if !s.note("bill", status, body, err) || status != http.StatusOK {
			continue
		}
		var b struct{ Reference, Amount string }
		if err := json.Unmarshal(body, &b); err != nil || b.Reference == "" {
			s.problem("bill %s acknowledged with %s", ref, body)
			continue
		}
		s.mu.Lock()
		s.bills[ref] = b.Reference
		s.mu.Unlock()

		form := chaosForm(s.m, s.token, b.Reference, b.Amount, ref)
		submits := 1
		if i%10 == 0 {
			submits = 2
		}
		var pw sync.WaitGroup
		for range submits {
			pw.Go(func() {
				status, body, err := chaosPost(s.node().base()+"/cardPay", form)
				if !s.note("payment", status, body, err) || status != http.StatusOK {
					return
				}
				for _, f := range parseForms(string(body)) {
					if f.Action == clusterCallbackURL && f.Inputs.Get("orderStatus") == "Transaction Successfull" {
						s.mu.Lock()
						if prev, ok := s.paid[b.Reference]; ok && prev != f.Inputs.Get("transactionRef") {
							s.problems = append(s.problems, fmt.Sprintf("bill %s acknowledged as paid by %s and by %s", b.Reference, prev, f.Inputs.Get("transactionRef")))
						}
						s.paid[b.Reference] = f.Inputs.Get("transactionRef")
						s.mu.Unlock()
					}
				}
			})
		}
		pw.Wait()
	}
}

// note records an answer: a connection a kill cut and a 503 are expected,
// a 5xx of any other kind never is. It reports whether there was an answer.
// A client waits a little after either, as a real one would, rather than
// spin on a node that is restarting.
func (s *chaosStore) note(what string, status int, body []byte, err error) bool {
	switch {
	case err != nil:
		s.cut.Add(1)
		time.Sleep(20 * time.Millisecond)
		return false
	case status == http.StatusServiceUnavailable:
		s.unavailable.Add(1)
		time.Sleep(20 * time.Millisecond)
	case status >= 500:
		s.problem("%s answered %d: %s", what, status, tail(body, 5))
	}
	return true
}

// check waits for every payment to settle and every paid bill to be
// notified, then holds the store to what its nodes acknowledged.
func (s *chaosStore) check(t *testing.T) {
	t.Helper()
	for _, p := range s.problems {
		t.Errorf("%s: %s", s.name, p)
	}
	db := s.open(t)
	count := func(q string) int {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %s: %v", s.name, q, err)
		}
		return n
	}
	// A payment a crash or the outage left in flight settles once its
	// node's next run starts, or after the acquirer timeout on any node.
	clusterWait(t, 2*time.Minute, s.name+" payments to settle", func() bool {
		return count(`SELECT COUNT(*) FROM payments WHERE status NOT IN ('succeeded', 'failed')`) == 0
	}, func() string {
		return fmt.Sprint(count(`SELECT COUNT(*) FROM payments WHERE status NOT IN ('succeeded', 'failed')`), " unsettled")
	})
	for q, what := range map[string]string{
		`SELECT COUNT(*) FROM (SELECT bill_ref FROM payments WHERE status = 'succeeded' GROUP BY bill_ref HAVING COUNT(*) > 1) x`: "bills with two successful payments",
		`SELECT COUNT(*) FROM (SELECT p.bill_ref FROM sim_ledger l JOIN payments p ON p.id = l.payment_id
			WHERE l.outcome = 'approved' GROUP BY p.bill_ref HAVING COUNT(*) > 1) x`: "bills the acquirer charged twice",
		`SELECT COUNT(*) FROM sim_ledger l JOIN payments p ON p.id = l.payment_id WHERE l.outcome = 'approved' AND p.status <> 'succeeded'`: "charges the acquirer approved that the gateway does not show as paid",
		`SELECT COUNT(*) FROM sim_ledger l LEFT JOIN payments p ON p.id = l.payment_id WHERE p.id IS NULL`:                                  "acquirer charges without a payment",
	} {
		if n := count(q); n != 0 {
			t.Errorf("%s: %d %s", s.name, n, what)
		}
	}

	hc := &http.Client{Timeout: 30 * time.Second}
	base := s.nodes[0].base()
	for ref, billRef := range s.bills {
		status, body := chaosQuery(t, hc, base, s.token, ref)
		if status != http.StatusOK {
			t.Errorf("%s: acknowledged bill %s (%s) lost: %d %s", s.name, ref, billRef, status, body)
			continue
		}
		var q struct {
			Status        bool   `json:"status"`
			TransactionID string `json:"transactionId"`
		}
		_ = json.Unmarshal(body, &q)
		if tx, ok := s.paid[billRef]; ok && (!q.Status || q.TransactionID != tx) {
			t.Errorf("%s: acknowledged payment %s of bill %s lost: %s", s.name, tx, billRef, body)
		}
	}

	rows, err := db.Query(`SELECT bill_ref FROM payments WHERE status = 'succeeded'`)
	if err != nil {
		t.Fatal(err)
	}
	var paid []string
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			t.Fatal(err)
		}
		paid = append(paid, ref)
	}
	rows.Close()
	clusterWait(t, 2*time.Minute, s.name+" notifications of every paid bill", func() bool {
		got := s.rx.snapshot()
		for _, ref := range paid {
			if len(got.idsOf[ref]) == 0 {
				return false
			}
		}
		return true
	}, func() string {
		got, missing := s.rx.snapshot(), 0
		for _, ref := range paid {
			if len(got.idsOf[ref]) == 0 {
				missing++
			}
		}
		return fmt.Sprintf("%d of %d paid bills not notified", missing, len(paid))
	})
	for _, p := range s.rx.snapshot().problems {
		t.Errorf("%s receiver: %s", s.name, p)
	}
	for ref, ids := range s.rx.snapshot().idsOf {
		if len(ids) > 1 {
			t.Errorf("%s: bill %s notified under %d webhook-ids (one payment, one event)", s.name, ref, len(ids))
		}
	}
}

// open reads the store's database directly: no endpoint lists payments
// or the simulated acquirer's ledger.
func (s *chaosStore) open(t *testing.T) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if s.name == "postgres" {
		db, err = sql.Open("pgx", s.nodes[0].where[1])
	} else {
		db, err = sql.Open("sqlite", "file:"+filepath.Join(s.nodes[0].where[1], "kadi.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// chaosOutage is what the PostgreSQL outage looked like from outside.
type chaosOutage struct {
	answers           int
	slowest, recovery time.Duration
}

// pgOutage stops PostgreSQL as a crash would, asks both of its nodes for
// each kind of answer while it is down, starts it again and waits for the
// nodes to serve.
func pgOutage(t *testing.T, pg *privatePostgres, s *chaosStore) chaosOutage {
	t.Helper()
	var o chaosOutage
	pg.ctl(t, "stop", "-m", "immediate")
	hc := &http.Client{Timeout: 2 * chaosOutageBound}
	down := time.Now()
	for i := 0; time.Since(down) < 3*time.Second; i++ {
		for _, n := range s.nodes {
			ref := fmt.Sprintf("OUT%d%s", i, n.name[len(n.name)-1:])
			for what, ask := range map[string]func() (int, []byte, error){
				"bill":  func() (int, []byte, error) { return chaosBill(hc, n.base(), s.token, s.m, ref) },
				"query": func() (int, []byte, error) { st, b := chaosQuery(t, hc, n.base(), s.token, "X0N0"); return st, b, nil },
				"readyz": func() (int, []byte, error) {
					req, _ := http.NewRequest(http.MethodGet, n.base()+"/readyz", nil)
					return chaosDo(hc, req)
				},
				"token": func() (int, []byte, error) {
					st, b := clusterTokenRequest(t, &clusterNode{base: n.base()}, s.m, s.m.Test.APIKey)
					return st, b, nil
				},
				"payment": func() (int, []byte, error) {
					return chaosPost(n.base()+"/cardPay", chaosForm(s.m, s.token, "NOSUCHBILL1", "10.00", "NOSUCH1"))
				},
			} {
				start := time.Now()
				status, body, err := ask()
				took := time.Since(start)
				o.answers++
				o.slowest = max(o.slowest, took)
				switch {
				case err != nil:
					t.Errorf("outage: %s on %s: %v", what, n.name, err)
				case status != http.StatusServiceUnavailable:
					t.Errorf("outage: %s on %s answered %d, want 503: %s", what, n.name, status, tail(body, 5))
				case took > chaosOutageBound:
					t.Errorf("outage: %s on %s took %s", what, n.name, took)
				}
			}
		}
	}
	pg.ctl(t, "start", "-w")
	up := time.Now()
	for _, n := range s.nodes {
		clusterWait(t, chaosRecoveryBound, n.name+" to serve after the database came back", func() bool {
			status, _, _ := chaosBill(hc, n.base(), s.token, s.m, fmt.Sprintf("BACK%d%s", time.Now().UnixNano()%1e6, n.name[len(n.name)-1:]))
			return status == http.StatusOK
		}, nil)
	}
	o.recovery = time.Since(up)
	return o
}

// chaosNode is one `kadi serve` that the test kills and restarts on the
// same address and node name, as a supervisor restarts a crashed service.
type chaosNode struct {
	name  string
	key   string
	where []string // --database-url URL or --data-dir DIR

	mu     sync.Mutex
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	runs   int
	logDir string
}

func startChaosNode(t *testing.T, name, key string, where ...string) *chaosNode {
	n := &chaosNode{name: name, key: key, where: where, addr: "127.0.0.1:" + freePort(t), logDir: t.TempDir()}
	n.start(t)
	t.Cleanup(func() {
		n.mu.Lock()
		cmd, exited := n.cmd, n.exited
		n.mu.Unlock()
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			logs, _ := os.ReadFile(filepath.Join(n.logDir, fmt.Sprintf("run-%d.log", n.runs)))
			t.Logf("node %s, last run's log:\n%s", name, tail(logs, 30))
		}
	})
	return n
}

func (n *chaosNode) base() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return "http://" + n.addr
}

func (n *chaosNode) start(t *testing.T) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		n.mu.Lock()
		n.runs++
		logPath := filepath.Join(n.logDir, fmt.Sprintf("run-%d.log", n.runs))
		args := append([]string{"serve", "--addr", n.addr, "--public-url", "http://" + n.addr, "--node-name", n.name,
			"--allow-private-ipn", "--ipn-poll", clusterPoll.String()}, n.where...)
		if n.where[0] == "--database-url" {
			args = append(args, "--data-dir", filepath.Join(n.logDir, "data"))
		}
		cmd := exec.Command(kadiBin, args...)
		cmd.Env = append(os.Environ(), "KADI_SECRET_KEY="+n.key)
		logFile, err := os.Create(logPath)
		if err != nil {
			n.mu.Unlock()
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			n.mu.Unlock()
			t.Fatalf("start node %s: %v", n.name, err)
		}
		logFile.Close()
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		n.cmd, n.exited = cmd, exited
		base := "http://" + n.addr
		n.mu.Unlock()
		err = waitReady(exited, logPath, base)
		if err == nil {
			return
		}
		logs, _ := os.ReadFile(logPath)
		// The address was freed by the kill; something else may have
		// taken it meanwhile. The node name, not the address, ties the
		// runs together.
		if attempt < 3 && bytes.Contains(logs, []byte("the port is in use")) {
			n.mu.Lock()
			n.addr = "127.0.0.1:" + freePort(t)
			n.mu.Unlock()
			continue
		}
		t.Fatalf("node %s run %d: %v; log:\n%s", n.name, n.runs, err, tail(logs, 30))
	}
}

func (n *chaosNode) kill(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill node %s: %v", n.name, err)
	}
	<-exited
}

func chaosMerchant(t *testing.T, where ...string) merchantCreds {
	t.Helper()
	out, errOut, err := runKadi(t, append(append([]string{"merchant", "create"}, where...), "--name", "Chaos Shop", "--json")...)
	if err != nil {
		t.Fatalf("kadi merchant create: %v\n%s", err, errOut)
	}
	var m merchantCreds
	if err := json.Unmarshal(out, &m); err != nil || m.MerchantCode == "" {
		t.Fatalf("kadi merchant create printed %q: %v", out, err)
	}
	return m
}

// chaosToken is a pay-and-bill access token; it verifies on every node
// sharing the master key, without the database.
func chaosToken(t *testing.T, base string, m merchantCreds) string {
	t.Helper()
	status, body := clusterTokenRequest(t, &clusterNode{base: base}, m, m.Test.APIKey)
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.AccessToken == "" {
		t.Fatalf("token: %d %s", status, body)
	}
	return tr.AccessToken
}

func chaosBill(hc *http.Client, base, token string, m merchantCreds, ref string) (int, []byte, error) {
	body, _ := json.Marshal(map[string]any{"customer": map[string]string{"name": "Wanjiku Kamau"},
		"order": map[string]string{"billerCode": m.BillerCode, "reference": ref, "amount": "10.00", "currency": "KES",
			"description": "Order " + ref, "channel": "CARD", "outlet": m.OutletCode}})
	req, err := http.NewRequest(http.MethodPost, base+"/payment/v2/bills", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return chaosDo(hc, req)
}

func chaosQuery(t *testing.T, hc *http.Client, base, token, ref string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/payment/v2/query?"+url.Values{"billReference": {ref}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	status, body, err := chaosDo(hc, req)
	if err != nil {
		t.Fatalf("query %s: %v", ref, err)
	}
	return status, body
}

// chaosPost posts a payment form as a browser does, following the one 303
// to the hosted page.
func chaosPost(target string, form url.Values) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return chaosDo(browserless, req)
}

func chaosDo(hc *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func chaosForm(m merchantCreds, token, billRef, amount, orderRef string) url.Values {
	return clusterForm(m, token, &client.Bill{Reference: billRef, Amount: amount, OrderRef: orderRef}, "4242424242424242")
}

// privatePostgres is a PostgreSQL server of the test's own, which it may
// stop: the shared one on 5432 serves other tests.
type privatePostgres struct {
	bin, dir, url string
	asPostgres    bool // run its commands as the postgres user (the test runs as root)
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("KADI_TEST_DATABASE_URL") != "" {
			t.Fatal("PostgreSQL's server binaries (initdb, pg_ctl) are not under /usr/lib/postgresql: apt-get install postgresql")
		}
		t.Skip("no PostgreSQL server binaries: TestChaos needs a PostgreSQL of its own to stop")
	}
	slices.Sort(bins)
	pg := &privatePostgres{bin: filepath.Dir(bins[len(bins)-1]), asPostgres: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "kadi-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	pg.dir = dir
	if pg.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = pg.run("pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-m", "immediate", "stop")
		os.RemoveAll(pg.dir)
	})
	if out, err := pg.output("initdb", "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	// fsync off: the server is only ever stopped, never the machine, and
	// the page cache keeps what a crash of the server would lose.
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300", port, dir)
	if err := os.WriteFile(filepath.Join(dir, "opts"), []byte(opts), 0o644); err != nil {
		t.Fatal(err)
	}
	pg.url = "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	pg.ctl(t, "start", "-w")
	return pg
}

// ctl runs pg_ctl with the server's options and log.
func (pg *privatePostgres) ctl(t *testing.T, args ...string) {
	t.Helper()
	opts, _ := os.ReadFile(filepath.Join(pg.dir, "opts"))
	all := append([]string{"-D", filepath.Join(pg.dir, "data"), "-l", filepath.Join(pg.dir, "log"), "-o", string(opts)}, args...)
	if out, err := pg.output("pg_ctl", all...); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		t.Fatalf("pg_ctl %v: %v\n%s\n%s", args, err, out, tail(log, 20))
	}
}

func (pg *privatePostgres) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(pg.bin, name)
	if pg.asPostgres {
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
		cmd.Dir = pg.dir
		return cmd
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = pg.dir
	return cmd
}

func (pg *privatePostgres) output(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := pg.command(name, args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Dir = pg.dir
	return cmd.CombinedOutput()
}

func (pg *privatePostgres) run(name string, args ...string) error {
	_, err := pg.output(name, args...)
	return err
}
