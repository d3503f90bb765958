package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for the test's own database handling

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/store"
)

// clusterCallbackURL is where the hosted form sends the browser back. The
// test reads the redirect page instead of following it, so nothing needs to
// listen there.
const clusterCallbackURL = "https://shop.example/kadi/callback"

// clusterPoll is the nodes' --ipn-poll: fast, so deliveries take well under
// a second and "a few polls later" is a short wait.
const clusterPoll = 100 * time.Millisecond

// TestTwoNodesSharePostgres runs two `kadi serve` nodes on one PostgreSQL
// database, as docs/operations.md describes scale-out: tokens verify on any node
// without a database round trip, a bill is charged at most once whichever
// nodes its submits reach, each IPN is delivered by exactly one node, and a
// rotated API key (docs/security.md) stops working on every node.
func TestTwoNodesSharePostgres(t *testing.T) {
	dbURL, db, key, m := clusterWithMerchant(t, "Cluster Shop")

	// The receiver comes before the nodes so that it outlives them.
	rx := newClusterReceiver(t, m.Test.NotificationSecret)
	setTestIPN(t, []string{"--database-url", dbURL}, m.MerchantCode, rx.URL+"/ipn", clusterIPNUser, clusterIPNPassword)

	a := clusterStartNode(t, "A", dbURL, key)
	b := clusterStartNode(t, "B", dbURL, key)
	nodes := []*clusterNode{a, b}
	clientA, clientB := a.client(t, m, m.Test.APIKey), b.client(t, m, m.Test.APIKey)
	ctx := context.Background()

	// approved and declined collect the bills paid so far, for the IPN check.
	var approved, declined []string
	var lastBill *client.Bill

	t.Run("token from one node verifies on the other", func(t *testing.T) {
		bill, err := clientA.CreateBill(ctx, clusterBillRequest(m, "XNODE1", "1500.00"))
		if err != nil {
			t.Fatalf("CreateBill on A: %v", err)
		}
		lastBill = bill
		tokA, err := clientA.Token(ctx)
		if err != nil {
			t.Fatalf("token from A: %v", err)
		}
		tokB, err := clientB.Token(ctx)
		if err != nil {
			t.Fatalf("token from B: %v", err)
		}
		for _, c := range []struct {
			name, token string
			on          *clusterNode
		}{{"A's token on B", tokA, b}, {"B's token on A", tokB, a}, {"A's token on A", tokA, a}} {
			status, _, body := clusterQuery(t, c.on, c.token, bill.Reference)
			if status != http.StatusOK {
				t.Errorf("%s: query of a bill made on A: HTTP %d %s", c.name, status, body)
				continue
			}
			var v struct {
				OrderRef string `json:"orderRef"`
				Status   any    `json:"status"`
			}
			if err := json.Unmarshal(body, &v); err != nil || v.OrderRef != "XNODE1" || v.Status != false {
				t.Errorf("%s: unpaid bill made on A verifies as %s (%v)", c.name, body, err)
			}
		}
		// Bill creation is idempotent across nodes too (docs/api.md): the
		// same request on B is the same bill, not a second one.
		again, err := clientB.CreateBill(ctx, clusterBillRequest(m, "XNODE1", "1500.00"))
		if err != nil || again.Reference != bill.Reference {
			t.Errorf("the same bill request on B: %+v (%v), want reference %s", again, err, bill.Reference)
		}
		// The client says which answer was a replay, and what the bill
		// can do.
		if err == nil && (bill.Replayed || !again.Replayed || bill.State != "open" || again.State != "open") {
			t.Errorf("first answer replayed %v, state %q; retry replayed %v, state %q", bill.Replayed, bill.State, again.Replayed, again.State)
		}
	})

	t.Run("concurrent submits across nodes charge once", func(t *testing.T) {
		bill, err := clientA.CreateBill(ctx, clusterBillRequest(m, "RACE1", "2750.00"))
		if err != nil {
			t.Fatalf("CreateBill: %v", err)
		}
		token, err := clientA.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		form := clusterForm(m, token, bill, "4242424242424242")

		const submits = 20
		results := make([]clusterResult, submits)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range submits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = clusterSubmit(nodes[i%2], form)
			}()
		}
		close(start)
		wg.Wait()

		ref := ""
		ok := true
		for i, r := range results {
			switch {
			case r.err != nil:
				t.Errorf("submit %d to %s: %v", i, nodes[i%2].name, r.err)
			case r.callback.Get("orderStatus") != client.StatusSuccessful || r.callback.Get("transactionRef") == "":
				t.Errorf("submit %d to %s: callback %v", i, nodes[i%2].name, r.callback)
			case ref == "":
				ref = r.callback.Get("transactionRef")
				continue
			case r.callback.Get("transactionRef") != ref:
				t.Errorf("submit %d to %s: transactionRef %s, another submit got %s", i, nodes[i%2].name, r.callback.Get("transactionRef"), ref)
			default:
				continue
			}
			ok = false
		}
		statuses := clusterPaymentStatuses(t, db, bill.Reference)
		if len(statuses) != 1 || statuses[0] != "succeeded" {
			t.Errorf("payments of the bill: %v, want exactly one, succeeded: every other submit, on either node, must wait for it", statuses)
			ok = false
		}
		for _, c := range []*client.Client{clientA, clientB} {
			v, err := c.Verify(ctx, bill.Reference)
			if err != nil || !v.Paid || v.TransactionID != ref || v.Amount != "2750.00" {
				t.Errorf("Verify after the race: %+v (%v), want paid with transactionId %s", v, err, ref)
				ok = false
			}
		}
		if ok {
			approved = append(approved, bill.Reference)
		}
	})

	t.Run("payments through both nodes", func(t *testing.T) {
		const visa, decline = "4242424242424242", "4000000000000002"
		// Each node takes approved and declined payments, and every bill
		// is made on the node that does not take its payment.
		cards := []string{visa, visa, decline, decline, visa, visa}
		for i, number := range cards {
			payOn, billOn := nodes[i%2], nodes[(i+1)%2]
			billClient, payClient := clientA, clientB
			if billOn == b {
				billClient, payClient = clientB, clientA
			}
			bill, err := billClient.CreateBill(ctx, clusterBillRequest(m, fmt.Sprintf("PAY%d", i), "1500.00"))
			if err != nil {
				t.Fatalf("CreateBill on %s: %v", billOn.name, err)
			}
			token, err := payClient.Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r := clusterSubmit(payOn, clusterForm(m, token, bill, number))
			if r.err != nil {
				t.Fatalf("pay bill %d on %s: %v", i, payOn.name, r.err)
			}
			wantPaid := number == visa
			want := map[bool]string{true: client.StatusSuccessful, false: client.StatusFailed}[wantPaid]
			if got := r.callback.Get("orderStatus"); got != want {
				t.Fatalf("card ending %s on %s: orderStatus %q (%s), want %q", number[len(number)-4:], payOn.name, got, r.callback.Get("message"), want)
			}
			v, err := billClient.Verify(ctx, bill.Reference)
			if err != nil || v.Paid != wantPaid || v.TransactionID != r.callback.Get("transactionRef") {
				t.Fatalf("Verify on %s of a bill paid on %s: %+v (%v), want paid=%v transactionId %q",
					billOn.name, payOn.name, v, err, wantPaid, r.callback.Get("transactionRef"))
			}
			if wantPaid {
				approved = append(approved, bill.Reference)
			} else {
				declined = append(declined, bill.Reference)
			}
		}
	})

	t.Run("each IPN delivered exactly once across the cluster", func(t *testing.T) {
		if len(approved) == 0 {
			t.Skip("no approved payment to be notified of (see the failures above)")
		}
		clusterWait(t, 30*time.Second, "every approved payment's IPN", func() bool {
			got := rx.snapshot()
			for _, ref := range approved {
				if len(got.idsOf[ref]) == 0 {
					return false
				}
			}
			return true
		}, func() string {
			got := rx.snapshot()
			return fmt.Sprintf("approved %v; received %v; deliveries %v; problems %v", approved, got.idsOf, got.deliveries, got.problems)
		})
		// Another node that also took an event would deliver it within a
		// poll or two; give it ten.
		time.Sleep(10 * clusterPoll)
		got := rx.snapshot()
		for _, ref := range approved {
			ids := got.idsOf[ref]
			if len(ids) != 1 {
				t.Errorf("bill %s notified under %d webhook-ids %v, want one", ref, len(ids), ids)
			}
			for _, id := range ids {
				if n := got.deliveries[id]; n != 1 {
					t.Errorf("webhook-id %s (bill %s) delivered %d times, want exactly once", id, ref, n)
				}
			}
		}
		for _, ref := range declined {
			if len(got.idsOf[ref]) != 0 {
				t.Errorf("declined bill %s was notified", ref)
			}
		}
		if len(got.idsOf) != len(approved) {
			t.Errorf("notifications for %d bills %v, want the %d approved %v", len(got.idsOf), got.idsOf, len(approved), approved)
		}
		if len(got.problems) > 0 {
			t.Errorf("receiver: %s", strings.Join(got.problems, "; "))
		}

		// The gateway's own record agrees: each event delivered, at the
		// first attempt, by whichever node claimed it.
		var evs []struct {
			ID       string `json:"id"`
			Status   string `json:"status"`
			Attempts int    `json:"attempts"`
		}
		clusterWait(t, 30*time.Second, "every IPN event recorded as delivered", func() bool {
			out, errOut, err := runKadi(t, "ipn", "list", "--database-url", dbURL, "--merchant", m.MerchantCode, "--json")
			if err != nil {
				t.Fatalf("kadi ipn list: %v\nstderr: %s", err, errOut)
			}
			evs = nil
			if err := json.Unmarshal(out, &evs); err != nil {
				t.Fatalf("kadi ipn list --json printed %q: %v", out, err)
			}
			for _, ev := range evs {
				if ev.Status != "delivered" {
					return false
				}
			}
			return true
		}, func() string { return fmt.Sprintf("events %+v", evs) })
		if len(evs) != len(approved) {
			t.Errorf("%d IPN events %+v, want one per approved payment (%d)", len(evs), evs, len(approved))
		}
		for _, ev := range evs {
			if ev.Attempts != 1 || got.deliveries[ev.ID] != 1 {
				t.Errorf("event %s: %d attempts, %d deliveries received; want 1 and 1", ev.ID, ev.Attempts, got.deliveries[ev.ID])
			}
		}
	})

	// SQLite stores any bytes; PostgreSQL refuses invalid UTF-8 and NUL. Such
	// input must be a clear 4xx at every entry point, never a 500.
	t.Run("bytes PostgreSQL refuses are a 4xx, never a 500", func(t *testing.T) {
		token, err := clientA.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		post := func(path, body, authz string) *http.Request {
			req, err := http.NewRequest(http.MethodPost, a.base+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if authz != "" {
				req.Header.Set("Authorization", authz)
			}
			return req
		}
		query := func(ref string) *http.Request {
			req, err := http.NewRequest(http.MethodGet, a.base+"/payment/v2/query?billReference="+ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			return req
		}
		for _, tc := range []struct {
			name string
			req  *http.Request
		}{
			{"token username 0xff", post("/identity/v2/token", "username=%ff&password=x", "Basic kadi_test_x")},
			{"token username NUL", post("/identity/v2/token", "username=a%00b&password=x", "Basic kadi_test_x")},
			{"token merchantCode 0xff", post("/token", "merchantCode=%ff&password=x&grant_type=password", "Basic "+m.Test.APIKey)},
			{"query 0xff", query("%ff")},
			{"query NUL", query("a%00b")},
			{"cardPay billReference 0xff", post("/cardPay", url.Values{"token": {token}, "merchantCode": {m.MerchantCode}}.Encode()+"&billReference=%ff", "")},
			{"cardPay NUL", post("/cardPay", url.Values{"token": {token}, "merchantCode": {m.MerchantCode}}.Encode()+"&billReference=A%00B", "")},
			{"3-D Secure payment 0xff", post("/cardPay/3ds", "checkout=%ff&code=123456", "")},
			{"bill JSON with NUL", func() *http.Request {
				r := post("/payment/v2/bills", `{"customer":{"name":"a\u0000b"},"order":{"reference":"A\u0000B"}}`, "Bearer "+token)
				return r
			}()},
		} {
			status, _, body := clusterDo(t, tc.req)
			if status < 400 || status >= 500 {
				t.Errorf("%s: HTTP %d, want a 4xx: %s", tc.name, status, body)
			}
		}
	})

	t.Run("rotated key stops working on every node", func(t *testing.T) {
		if lastBill == nil {
			t.Skip("no bill to query (see the failures above)")
		}
		oldToken, err := clientA.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Without this the 401s below would prove nothing.
		for _, n := range nodes {
			if status, _, body := clusterQuery(t, n, oldToken, lastBill.Reference); status != http.StatusOK {
				t.Fatalf("before rotation the token gets HTTP %d on %s: %s", status, n.name, body)
			}
		}

		out, errOut, err := runKadi(t, "merchant", "rotate-key", "--database-url", dbURL, "--merchant", m.MerchantCode, "--mode", "test", "--json")
		if err != nil {
			t.Fatalf("kadi merchant rotate-key: %v\nstderr: %s", err, errOut)
		}
		var rotated struct {
			APIKey string `json:"apiKey"`
		}
		if err := json.Unmarshal(out, &rotated); err != nil || rotated.APIKey == "" || rotated.APIKey == m.Test.APIKey {
			t.Fatalf("kadi merchant rotate-key --json printed %q: %v", out, err)
		}

		// The key itself is looked up in the database: refused at once.
		// Once per node only: each refusal counts towards the lockout.
		for _, n := range nodes {
			status, body := clusterTokenRequest(t, n, m, m.Test.APIKey)
			if status != http.StatusUnauthorized || !bytes.Contains(body, []byte("invalid_client")) {
				t.Errorf("old API key right after rotation on %s: HTTP %d %s, want 401 invalid_client", n.name, status, body)
			}
		}

		// Tokens verify in memory; each node learns of the revocation from
		// its next refresh (every second by default).
		for _, n := range nodes {
			began := time.Now()
			var status int
			var header http.Header
			clusterWait(t, 15*time.Second, "the old token refused on "+n.name, func() bool {
				status, header, _ = clusterQuery(t, n, oldToken, lastBill.Reference)
				return status == http.StatusUnauthorized
			}, func() string { return fmt.Sprintf("last answer HTTP %d", status) })
			if wa := header.Get("WWW-Authenticate"); !strings.Contains(wa, "invalid_token") {
				t.Errorf("old token on %s: WWW-Authenticate %q, want Bearer error=\"invalid_token\"", n.name, wa)
			}
			t.Logf("old token refused on %s %s after rotation", n.name, time.Since(began).Round(10*time.Millisecond))
		}

		var newTokens []string
		for _, n := range nodes {
			c := n.client(t, m, rotated.APIKey)
			v, err := c.Verify(ctx, lastBill.Reference)
			if err != nil || v.OrderRef != lastBill.OrderRef {
				t.Errorf("new key on %s: Verify %+v (%v)", n.name, v, err)
				continue
			}
			tok, err := c.Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			newTokens = append(newTokens, tok)
		}
		// And the new key's tokens cross nodes like the old ones did.
		if len(newTokens) == 2 {
			for i, n := range []*clusterNode{b, a} {
				if status, _, body := clusterQuery(t, n, newTokens[i], lastBill.Reference); status != http.StatusOK {
					t.Errorf("new token from the other node on %s: HTTP %d %s", n.name, status, body)
				}
			}
		}
	})

	// Both drain at once; each must then exit 0.
	for _, n := range nodes {
		n.signal(t, syscall.SIGTERM)
	}
	for _, n := range nodes {
		n.waitStopped(t)
	}
}

// clusterDatabase creates a database of its own for the test on the server
// adminURL names and drops it at cleanup. It returns the new database's URL
// and a handle on it for the checks no CLI command offers.
// clusterWithMerchant skips without PostgreSQL; otherwise it gives a fresh
// database (its URL and a handle, closed after every node has stopped:
// registered first, it runs last), the master key every node and the CLI
// share (secrets at rest are sealed under it, set as KADI_SECRET_KEY), and
// a merchant named name made by the CLI.
func clusterWithMerchant(t *testing.T, name string) (string, *sql.DB, string, merchantCreds) {
	t.Helper()
	adminURL := os.Getenv("KADI_TEST_DATABASE_URL")
	if testing.Short() || adminURL == "" {
		t.Skip("needs PostgreSQL: set KADI_TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/kadi_test?sslmode=disable) and drop -short")
	}
	dbURL, db := clusterDatabase(t, adminURL)
	key := hex.EncodeToString(clusterRandom(t, 32))
	t.Setenv("KADI_SECRET_KEY", key)
	out, errOut, err := runKadi(t, "merchant", "create", "--database-url", dbURL, "--name", name, "--json")
	if err != nil {
		t.Fatalf("kadi merchant create: %v\nstderr: %s", err, errOut)
	}
	var m merchantCreds
	if err := json.Unmarshal(out, &m); err != nil || m.MerchantCode == "" || m.Test.APIKey == "" {
		t.Fatalf("kadi merchant create --json printed %q: %v", out, err)
	}
	return dbURL, db, key, m
}

func clusterDatabase(t *testing.T, adminURL string) (string, *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		t.Fatalf("KADI_TEST_DATABASE_URL: %v", err)
	}
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		t.Fatalf("KADI_TEST_DATABASE_URL is set but PostgreSQL does not answer: %v", err)
	}
	// Random hex: safe to splice into the statement, which takes no
	// parameters for a name.
	name := "kadi_e2e_" + hex.EncodeToString(clusterRandom(t, 6))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("KADI_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a node killed after a failure may leave sessions behind.
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	return u.String(), db
}

func clusterRandom(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// clusterPaymentStatuses lists every payment attempt of a bill. No command
// shows payments, so the test reads the table.
func clusterPaymentStatuses(t *testing.T, db *sql.DB, billRef string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT status FROM payments WHERE bill_ref = $1", billRef)
	if err != nil {
		t.Fatalf("read payments: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("read payments: %v", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read payments: %v", err)
	}
	return out
}

// clusterNode is one `kadi serve` of the cluster, with a data dir of its own
// that holds nothing the other node needs.
type clusterNode struct {
	name, addr, base string
	logPath          string
	cmd              *exec.Cmd
	exited           chan struct{}
	state            *os.ProcessState
}

func clusterStartNode(t *testing.T, name, dbURL, key string) *clusterNode {
	t.Helper()
	for attempt := 1; ; attempt++ {
		n, err := clusterLaunch(t, name, dbURL, key)
		if err == nil {
			return n
		}
		logs, _ := os.ReadFile(n.logPath)
		// Another test may take the port between freePort and the listen.
		if attempt < 3 && bytes.Contains(logs, []byte("the port is in use")) {
			continue
		}
		t.Fatalf("node %s: %v; log:\n%s", name, err, tail(logs, 40))
	}
}

func clusterLaunch(t *testing.T, name, dbURL, key string) (*clusterNode, error) {
	t.Helper()
	n := &clusterNode{name: name, addr: "127.0.0.1:" + freePort(t), exited: make(chan struct{})}
	n.base = "http://" + n.addr
	n.logPath = filepath.Join(t.TempDir(), "node-"+name+".log")
	logFile, err := os.Create(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	n.cmd = exec.Command(kadiBin, "serve", "--addr", n.addr, "--public-url", n.base, "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--database-url", dbURL, "--allow-private-ipn", "--ipn-poll", clusterPoll.String())
	n.cmd.Env = append(os.Environ(), "KADI_SECRET_KEY="+key)
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", name, err)
	}
	go func() {
		_ = n.cmd.Wait()
		n.state = n.cmd.ProcessState
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			logs, _ := os.ReadFile(n.logPath)
			t.Logf("node %s log (last lines):\n%s", name, tail(logs, 12))
		}
	})

	return n, waitReady(n.exited, n.logPath, n.base)
}

func (n *clusterNode) client(t *testing.T, m merchantCreds, apiKey string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: n.base, APIKey: apiKey, Username: m.MerchantCode, Password: m.Password,
		HTTPClient: &http.Client{Timeout: 60 * time.Second}})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

func (n *clusterNode) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	select {
	case <-n.exited:
		t.Fatalf("node %s exited before %v: %v", n.name, sig, n.state)
	default:
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal node %s: %v", n.name, err)
	}
}

func (n *clusterNode) waitStopped(t *testing.T) {
	t.Helper()
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		_ = n.cmd.Process.Kill()
		<-n.exited
		t.Fatalf("node %s ignored SIGTERM for %s", n.name, stopTimeout)
	}
	if !n.state.Success() {
		logs, _ := os.ReadFile(n.logPath)
		t.Errorf("node %s after SIGTERM: %v; log:\n%s", n.name, n.state, tail(logs, 20))
	}
}

// clusterQuery asks a node about a bill with a token given by hand, where
// the client package would swap a refused token for a fresh one.
func clusterQuery(t *testing.T, n *clusterNode, token, billRef string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.base+"/payment/v2/query?"+url.Values{"billReference": {billRef}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return clusterDo(t, req)
}

// clusterTokenRequest asks a node for a token with the given API key.
func clusterTokenRequest(t *testing.T, n *clusterNode, m merchantCreds, apiKey string) (int, []byte) {
	t.Helper()
	form := url.Values{"username": {m.MerchantCode}, "password": {m.Password}}
	req, err := http.NewRequest(http.MethodPost, n.base+"/identity/v2/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+apiKey)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status, _, body := clusterDo(t, req)
	return status, body
}

func clusterDo(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, resp.Header, body
}

func clusterBillRequest(m merchantCreds, orderRef, amount string) client.BillRequest {
	return client.BillRequest{
		Customer: client.Customer{Name: "Wanjiku Kamau"},
		Order: client.Order{BillerCode: m.BillerCode, Reference: orderRef, Amount: amount, Currency: "KES",
			Description: "Order " + orderRef, Outlet: m.OutletCode},
	}
}

// clusterForm is the hosted form for a bill with the card filled in, as a
// merchant's own page would post it.
func clusterForm(m merchantCreds, token string, b *client.Bill, number string) url.Values {
	return client.PaymentForm{
		Token: token, OutletCode: m.OutletCode, MerchantCode: m.MerchantCode,
		Amount: b.Amount, OrderReference: b.OrderRef, BillReference: b.Reference,
		ProductType: "tickets", ProductDescription: "Two tickets", ServiceDate: "2026-11-21",
		CustomerFirstName: "Wanjiku", CustomerLastName: "Kamau", Country: "KE",
		MobileNumber: "+254 712345678", EmailAddress: "wanjiku@example.com",
		PostalcodeZip: "00100", Address: "1 Kenyatta Avenue", City: "Nairobi", IPAddress: "198.51.100.7",
		CallbackURL: clusterCallbackURL, Card: testCard(number),
	}.Values()
}

// clusterResult is what one /cardPay submit brought back: the fields the
// redirect page would post to the merchant's callback.
type clusterResult struct {
	callback url.Values
	err      error
}

// clusterSubmit posts a payment form to a node's /cardPay. It reports
// instead of failing the test, so that goroutines may call it.
func clusterSubmit(n *clusterNode, form url.Values) clusterResult {
	resp, err := browserless.PostForm(n.base+"/cardPay", form)
	if err != nil {
		return clusterResult{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return clusterResult{err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return clusterResult{err: fmt.Errorf("HTTP %d:\n%s", resp.StatusCode, body)}
	}
	for _, f := range parseForms(string(body)) {
		if f.Action == clusterCallbackURL {
			return clusterResult{callback: f.Inputs}
		}
	}
	return clusterResult{err: fmt.Errorf("no form posting to %s on the page:\n%s", clusterCallbackURL, body)}
}

const (
	clusterIPNUser     = "cluster-ipn"
	clusterIPNPassword = "cluster-ipn-passw0rd"
)

// clusterReceiver is the merchant's IPN endpoint: it verifies each delivery
// with the client package and counts deliveries per webhook-id.
type clusterReceiver struct {
	*httptest.Server
	mu         sync.Mutex
	deliveries map[string]int      // webhook-id → verified deliveries
	idsOf      map[string][]string // bill reference → its distinct webhook-ids
	problems   []string
}

type clusterReceived struct {
	deliveries map[string]int
	idsOf      map[string][]string
	problems   []string
}

func newClusterReceiver(t *testing.T, secret string) *clusterReceiver {
	t.Helper()
	rx := &clusterReceiver{deliveries: map[string]int{}, idsOf: map[string][]string{}}
	h, err := client.NewIPNHandler(client.IPNConfig{Secret: secret, Username: clusterIPNUser, Password: clusterIPNPassword},
		func(_ context.Context, n client.Notification) error {
			rx.mu.Lock()
			defer rx.mu.Unlock()
			ref := n.Transaction.BillNumber
			if rx.deliveries[n.ID] == 0 {
				rx.idsOf[ref] = append(rx.idsOf[ref], n.ID)
			}
			rx.deliveries[n.ID]++
			if !n.Successful() || n.Transaction.PaymentMode != "CARD" {
				rx.problems = append(rx.problems, fmt.Sprintf("bill %s notified with status %q mode %q", ref, n.Transaction.Status, n.Transaction.PaymentMode))
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// Problems are recorded, not reported: a delivery may land while the
	// test goroutine is elsewhere.
	rx.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ipn" {
			rx.mu.Lock()
			rx.problems = append(rx.problems, "delivery to "+r.URL.Path)
			rx.mu.Unlock()
			http.NotFound(w, r)
			return
		}
		// A receiver slower than a few polls: while a delivery is in
		// flight both nodes look at the queue again, and only the lease
		// keeps them off the event.
		time.Sleep(3 * clusterPoll)
		rec := &ipnStatusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status/100 != 2 {
			rx.mu.Lock()
			rx.problems = append(rx.problems, fmt.Sprintf("delivery refused with HTTP %d (signature or credentials)", rec.status))
			rx.mu.Unlock()
		}
	}))
	t.Cleanup(rx.Close)
	return rx
}

// snapshot copies what has arrived so far.
func (rx *clusterReceiver) snapshot() clusterReceived {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	out := clusterReceived{deliveries: map[string]int{}, idsOf: map[string][]string{}, problems: append([]string(nil), rx.problems...)}
	for k, v := range rx.deliveries {
		out.deliveries[k] = v
	}
	for k, v := range rx.idsOf {
		out.idsOf[k] = append([]string(nil), v...)
	}
	return out
}

// clusterWait polls cond until it holds, failing the test after limit
// with what state says, if state is not nil.
func clusterWait(t *testing.T, limit time.Duration, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			detail := ""
			if state != nil {
				detail = ": " + state()
			}
			t.Fatalf("timed out after %s waiting for %s%s", limit, what, detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTwoNodesOfOneName: two nodes given one --node-name on one PostgreSQL
// database. Each finds the other's mark on the name's node_keys row, logs
// an ERROR and counts it in kadi_node_name_shared; and neither settles a
// payment in flight under another run of the name at once, as it would
// one its own crashed run left (a twin's charge in flight: its bill
// reopened while the card was being charged). It waits, as any node's
// payment does, until the acquirer timeout is well past.
func TestTwoNodesOfOneName(t *testing.T) {
	dbURL, db, key, m := clusterWithMerchant(t, "Twin Shop")
	t.Setenv("KADI_NODE_NAME", "web")
	a := clusterStartNode(t, "A", dbURL, key)
	b := clusterStartNode(t, "B", dbURL, key)
	nodes := []*clusterNode{a, b}
	state := func() string {
		var s []string
		for _, n := range nodes {
			s = append(s, n.name+" shared="+metricValue(t, n.base+"/metrics", "kadi_node_name_shared"))
		}
		return strings.Join(s, "; ")
	}
	clusterWait(t, 15*time.Second, "both nodes to find the name shared", func() bool {
		return metricValue(t, a.base+"/metrics", "kadi_node_name_shared") == "1" && metricValue(t, b.base+"/metrics", "kadi_node_name_shared") == "1"
	}, state)
	for _, n := range nodes {
		if logs, _ := os.ReadFile(n.logPath); !strings.Contains(string(logs), "another running node has this node's name") {
			t.Errorf("%s does not say its name is shared:\n%s", n.name, tail(logs, 10))
		}
	}

	// A charge in flight under another run of "web", stamped now.
	bl, err := a.client(t, m, m.Test.APIKey).CreateBill(t.Context(), clusterBillRequest(m, "TWIN1", "10.00"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b0, err := st.BillByID(t.Context(), bl.Reference)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := payment.Payment{ID: "pay_twin" + hex.EncodeToString(clusterRandom(t, 8)), BillReference: b0.Reference, MerchantCode: b0.MerchantCode,
		Mode: b0.Mode, Status: payment.Processing, Amount: b0.Amount, CreatedAt: now, UpdatedAt: now, Node: payment.NodeID("web", "run_twin")}
	if err := st.StartPayment(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	// Two reconciliation passes of each node (every 5 s).
	time.Sleep(11 * time.Second)
	if got := clusterPaymentStatuses(t, db, bl.Reference); len(got) != 1 || got[0] != string(payment.Processing) {
		t.Errorf("the twin's payment in flight: %v, want still processing (%s)", got, state())
	}
}
