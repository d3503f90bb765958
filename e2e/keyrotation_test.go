package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// TestMasterKeyRotationAcrossNodes runs `kadi secret rotate` under two
// `kadi serve` nodes on one PostgreSQL database that read one key file (of
// the one-line format of before key rings, as an existing install has),
// as docs/operations.md ("Rotating the master key") describes: tokens
// issued before keep verifying on both nodes; node A's tokens signed with
// the new key verify on B; the stored secrets are re-sealed under the new
// key and still sign IPN and open on both; a hosted page made before opens
// after; a card's fingerprint is the same before and after.
func TestMasterKeyRotationAcrossNodes(t *testing.T) {
	adminURL := os.Getenv("KADI_TEST_DATABASE_URL")
	if testing.Short() || adminURL == "" {
		t.Skip("needs PostgreSQL: set KADI_TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/kadi_test?sslmode=disable) and drop -short")
	}
	dbURL, db := clusterDatabase(t, adminURL)
	keyFile := filepath.Join(t.TempDir(), "kadi.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(clusterRandom(t, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", keyFile)

	out, errOut, err := runKadi(t, "merchant", "create", "--database-url", dbURL, "--name", "Rotation Shop", "--json")
	if err != nil {
		t.Fatalf("kadi merchant create: %v\nstderr: %s", err, errOut)
	}
	var m merchantCreds
	if err := json.Unmarshal(out, &m); err != nil || m.MerchantCode == "" {
		t.Fatalf("kadi merchant create --json printed %q: %v", out, err)
	}
	rx := newClusterReceiver(t, m.Test.NotificationSecret)
	setTestIPN(t, []string{"--database-url", dbURL}, m.MerchantCode, rx.URL+"/ipn", clusterIPNUser, clusterIPNPassword)
	a := clusterStartNode(t, "A", dbURL, "") // no KADI_SECRET_KEY: the nodes read KADI_SECRET_KEY_FILE
	b := clusterStartNode(t, "B", dbURL, "")
	clientA := a.client(t, m, m.Test.APIKey)
	ctx := context.Background()
	const card = "4242424242424242"

	// Before the rotation: a token, a paid bill (and its IPN), and a
	// hosted page of a second bill, left open.
	before := rotationToken(t, a, m)
	if id := tokenKeyID(t, before); id != "k0" {
		t.Fatalf("a token before rotation names key %q, want k0 (the key of the one-line file)", id)
	}
	paidBefore := rotationPay(t, ctx, clientA, a, m, before, "ROT1", card)
	rotationWaitIPN(t, rx, paidBefore)
	billAfter, err := clientA.CreateBill(ctx, clusterBillRequest(m, "ROT2", "250.00"))
	if err != nil {
		t.Fatal(err)
	}
	noCard := clusterForm(m, before, billAfter, card)
	for _, f := range []string{"cardNumber", "cardSecurity", "cardExpiryMonth", "cardExpiryYear"} {
		noCard.Del(f)
	}
	pageURL := rotationEntryPage(t, a, noCard)

	out, errOut, err = runKadi(t, "secret", "rotate", "--database-url", dbURL)
	if err != nil {
		t.Fatalf("kadi secret rotate: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if !strings.Contains(string(out), "current key is now k1") || !strings.Contains(string(out), "re-sealed under key k1") {
		t.Errorf("kadi secret rotate said:\n%s", out)
	}
	if ring, _ := os.ReadFile(keyFile); !strings.Contains(string(ring), "\nk1 ") || !strings.Contains(string(ring), "\nk0 ") {
		t.Errorf("the key file after rotation lacks k1 or k0:\n%d bytes", len(ring))
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file after rotation: %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	t.Run("sealed secrets are re-sealed under the new key", func(t *testing.T) {
		rows, err := db.QueryContext(ctx, `SELECT notification_secret, ipn_password FROM merchant_settings`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var sec, pw string
			if err := rows.Scan(&sec, &pw); err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{sec, pw} {
				if v == "" {
					continue
				}
				n++
				if !strings.HasPrefix(v, "sealed:v2:k1:") {
					t.Errorf("a stored secret is %.14s…, want sealed:v2:k1:", v)
				}
			}
		}
		if n != 3 { // two notification secrets, the test mode's IPN password
			t.Errorf("%d sealed values, want 3", n)
		}
	})

	t.Run("a new token from A verifies on B", func(t *testing.T) {
		fresh := rotationToken(t, a, m)
		if id := tokenKeyID(t, fresh); id != "k1" {
			t.Fatalf("A's token after rotation names key %q, want k1", id)
		}
		if status, _, body := clusterQuery(t, b, fresh, paidBefore); status != http.StatusOK {
			t.Errorf("A's new token on B: HTTP %d %s", status, body)
		}
	})

	t.Run("a token from before verifies on both", func(t *testing.T) {
		for _, n := range []*clusterNode{a, b} {
			if status, _, body := clusterQuery(t, n, before, paidBefore); status != http.StatusOK {
				t.Errorf("token from before the rotation on %s: HTTP %d %s", n.name, status, body)
			}
		}
	})

	t.Run("B took the new ring from the file", func(t *testing.T) {
		clusterWait(t, 10*time.Second, "B to log the reload", func() bool {
			logs, _ := os.ReadFile(b.logPath)
			return strings.Contains(string(logs), "master key ring reloaded")
		}, nil)
	})

	t.Run("a hosted page from before opens on B", func(t *testing.T) {
		resp, err := browserless.Get(b.base + pageURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s… on B after rotation: HTTP %d", pageURL[:20], resp.StatusCode)
		}
	})

	t.Run("IPN is signed with the re-sealed secret and card fingerprints match", func(t *testing.T) {
		clientB := b.client(t, m, m.Test.APIKey)
		tokB, err := clientB.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := clusterSubmit(b, clusterForm(m, tokB, billAfter, card))
		if res.err != nil || res.callback.Get("orderStatus") != "Transaction Successfull" {
			t.Fatalf("payment on B after rotation: %v %v", res.callback, res.err)
		}
		rotationWaitIPN(t, rx, billAfter.Reference)
		var fps []string
		for _, ref := range []string{paidBefore, billAfter.Reference} {
			var fp string
			if err := db.QueryRowContext(ctx, `SELECT card_fingerprint FROM payments WHERE bill_ref = $1`, ref).Scan(&fp); err != nil {
				t.Fatalf("fingerprint of %s: %v", ref, err)
			}
			fps = append(fps, fp)
		}
		if fps[0] == "" || fps[0] != fps[1] {
			t.Errorf("one card's fingerprints before and after rotation: %q and %q, want equal", fps[0], fps[1])
		}
	})
}

// rotationToken asks node n for an access token.
func rotationToken(t *testing.T, n *clusterNode, m merchantCreds) string {
	t.Helper()
	status, body := clusterTokenRequest(t, n, m, m.Test.APIKey)
	var v struct {
		AccessToken string `json:"access_token"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &v) != nil || v.AccessToken == "" {
		t.Fatalf("token from %s: HTTP %d %s", n.name, status, body)
	}
	return v.AccessToken
}

// tokenKeyID reads the id of the master key a token names (docs/security.md:
// the token's layout is Kadi's own; this test looks inside on purpose).
func tokenKeyID(t *testing.T, tok string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 3 || raw[0] != 3 || len(raw) < 2+int(raw[1]) {
		t.Fatalf("token of an unknown layout (%v)", err)
	}
	return string(raw[2 : 2+raw[1]])
}

// rotationPay creates a bill on n and pays it with number; it returns the
// bill's reference.
func rotationPay(t *testing.T, ctx context.Context, c *client.Client, n *clusterNode, m merchantCreds, token, orderRef, number string) string {
	t.Helper()
	bill, err := c.CreateBill(ctx, clusterBillRequest(m, orderRef, "1500.00"))
	if err != nil {
		t.Fatal(err)
	}
	res := clusterSubmit(n, clusterForm(m, token, bill, number))
	if res.err != nil || res.callback.Get("orderStatus") != "Transaction Successfull" {
		t.Fatalf("payment of %s on %s: %v %v", orderRef, n.name, res.callback, res.err)
	}
	return bill.Reference
}

// rotationEntryPage posts a form without card fields and returns the path
// of the card page it is sent to.
func rotationEntryPage(t *testing.T, n *clusterNode, form url.Values) string {
	t.Helper()
	noFollow := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.PostForm(n.base+"/cardPay", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/cardPay/page/") {
		t.Fatalf("POST /cardPay without a card: HTTP %d to %q", resp.StatusCode, loc)
	}
	return loc
}

// rotationWaitIPN waits for a verified delivery of billRef's notification;
// the receiver checks the signature and the IPN credentials.
func rotationWaitIPN(t *testing.T, rx *clusterReceiver, billRef string) {
	t.Helper()
	clusterWait(t, 20*time.Second, "the IPN of "+billRef, func() bool { return len(rx.snapshot().idsOf[billRef]) > 0 },
		func() string { return strings.Join(rx.snapshot().problems, "; ") })
	if p := rx.snapshot().problems; len(p) > 0 {
		t.Errorf("IPN receiver: %v", p)
	}
}

// TestSecretRotateSingleNode: on the embedded default the ring lives in
// the data dir; `kadi secret rotate --data-dir` works while the server
// runs, the server keeps tokens from before and signs new ones with the
// new key, and after a restart both still verify. With KADI_SECRET_KEY the
// command prints the new ring for the operator to set, and `kadi secret
// reseal` under it re-seals.
func TestSecretRotateSingleNode(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Single Rotation Shop") })
	node := &clusterNode{name: "single", base: g.BaseURL}
	before := rotationToken(t, node, m)

	out, errOut, err := runKadi(t, "secret", "rotate", "--data-dir", g.DataDir)
	if err != nil || !strings.Contains(string(out), "current key is now k1") || !strings.Contains(string(out), "2 re-sealed") {
		t.Fatalf("kadi secret rotate: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	after := rotationToken(t, node, m)
	if id := tokenKeyID(t, after); id != "k1" {
		t.Errorf("token after rotation names %q, want k1", id)
	}
	out, _, err = runKadi(t, "secret", "reseal", "--data-dir", g.DataDir)
	if err != nil || !strings.Contains(string(out), "0 re-sealed, 2 already under it") {
		t.Errorf("kadi secret reseal after rotate: %v %s", err, out)
	}
	for restart := range 2 {
		for _, tok := range []string{before, after} {
			if status, _, body := clusterQuery(t, node, tok, "NOSUCHBILL01"); status != http.StatusNotFound {
				t.Errorf("restart %d: token of key %s: HTTP %d %s, want 404 (accepted, no such bill)", restart, tokenKeyID(t, tok), status, body)
			}
		}
		if restart == 0 {
			g.Stop()
			g.Start()
		}
	}

	t.Run("KADI_SECRET_KEY", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		t.Setenv("KADI_SECRET_KEY", hex.EncodeToString(clusterRandom(t, 32)))
		createMerchant(t, dir, "Env Shop")
		out, errOut, err := runKadi(t, "secret", "rotate", "--data-dir", dir)
		line := strings.TrimSpace(string(out))
		if err != nil || !strings.HasPrefix(line, "KADI_SECRET_KEY='k1 ") || !strings.HasSuffix(line, "'") || !strings.Contains(line, ",k0 ") ||
			!strings.Contains(line, ",pinned card-fingerprint ") || !strings.Contains(string(errOut), "cannot change") {
			t.Fatalf("kadi secret rotate with KADI_SECRET_KEY: %v\nstdout: %.40s…\nstderr: %s", err, out, errOut)
		}
		t.Setenv("KADI_SECRET_KEY", strings.Trim(strings.TrimPrefix(line, "KADI_SECRET_KEY="), "'"))
		if out, errOut, err := runKadi(t, "secret", "reseal", "--data-dir", dir); err != nil || !strings.Contains(string(out), "2 re-sealed") {
			t.Errorf("kadi secret reseal under the printed ring: %v\n%s%s", err, out, errOut)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		ringBefore, err := os.ReadFile(filepath.Join(g.DataDir, "secret.key"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if after, _ := os.ReadFile(filepath.Join(g.DataDir, "secret.key")); string(after) != string(ringBefore) {
				t.Error("a refused command rewrote the ring")
			}
		}()
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"secret", "rotate", "--data-dir", filepath.Join(t.TempDir(), "none")}, "no master key ring at"},
			{[]string{"secret", "rotate", "--data-dir", t.TempDir(), "--key-file", filepath.Join(g.DataDir, "secret.key")}, "no Kadi database in"},
			{[]string{"secret", "reseal", "--database-url", "postgres://127.0.0.1:1/none"}, "every node needs the same key"},
			// Refused before the ring is touched (it was rewritten first).
			{[]string{"secret", "rotate", "--key-file", filepath.Join(g.DataDir, "secret.key"), "--database-url", "host=127.0.0.1 dbname=none"}, "must be a postgres:// or postgresql:// URL"},
		} {
			_, errOut, err := runKadi(t, tt.args...)
			if err == nil || !strings.Contains(string(errOut), tt.want) {
				t.Errorf("kadi %s: %v, stderr %q; want a refusal saying %q", strings.Join(tt.args, " "), err, errOut, tt.want)
			}
		}
		// Another install's key file: refused before it is rotated, and
		// before a merchant is sealed under it.
		wrong := filepath.Join(t.TempDir(), "wrong.key")
		wrongRing := hex.EncodeToString(clusterRandom(t, 32)) + "\n"
		if err := os.WriteFile(wrong, []byte(wrongRing), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"secret", "rotate", "--data-dir", g.DataDir, "--key-file", wrong},
			{"merchant", "create", "--data-dir", g.DataDir, "--name", "Stray Shop"},
		} {
			t.Setenv("KADI_SECRET_KEY_FILE", wrong)
			_, errOut, err := runKadi(t, args...)
			t.Setenv("KADI_SECRET_KEY_FILE", "")
			if err == nil || !strings.Contains(string(errOut), "does not open this database's secrets") {
				t.Errorf("kadi %s with another install's key: %v, stderr %q", strings.Join(args, " "), err, errOut)
			}
		}
		if after, _ := os.ReadFile(wrong); string(after) != wrongRing {
			t.Error("another install's key file was rotated")
		}
	})

	// operations.md's "a copy of the file each": rotating a copy touches no
	// database, and was refused for want of one.
	t.Run("a copy without re-sealing", func(t *testing.T) {
		ring, err := os.ReadFile(filepath.Join(g.DataDir, "secret.key"))
		if err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		copied := filepath.Join(work, "ring")
		if err := os.WriteFile(copied, ring, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(kadiBin, "secret", "rotate", "--reseal=false", "--key-file", "./ring")
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Master key rotated in ./ring") {
			t.Fatalf("rotate a copy: %v\n%s", err, out)
		}
	})
}

// TestNodeBehindARotationIsNotReady: nodes on one PostgreSQL database,
// each with a key file of its own (docs/operations.md's "copy of the file
// each"), and B's copy missed the rotation that A's had. B would refuse
// every token A issues: it logs an ERROR naming A's key and counts it in
// kadi_master_keys_missing, but with A alone ahead it stays ready (in a
// rolling restart onto a new ring the nodes not yet restarted are the
// many). Once C starts with the new ring too, B is the one left behind:
// /readyz 503 "keys", while A and C stay ready. When B's file gets the
// new ring, B is ready again without a restart.
func TestNodeBehindARotationIsNotReady(t *testing.T) {
	adminURL := os.Getenv("KADI_TEST_DATABASE_URL")
	if testing.Short() || adminURL == "" {
		t.Skip("needs PostgreSQL: set KADI_TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/kadi_test?sslmode=disable) and drop -short")
	}
	dbURL, _ := clusterDatabase(t, adminURL)
	dir := t.TempDir()
	old, fresh := hex.EncodeToString(clusterRandom(t, 32)), hex.EncodeToString(clusterRandom(t, 32))
	rotated := "k1 " + fresh + "\nk0 " + old + "\n"
	fileA, fileB := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	for path, ring := range map[string]string{fileA: rotated, fileB: old + "\n"} {
		if err := os.WriteFile(path, []byte(ring), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", fileA)
	if _, errOut, err := runKadi(t, "merchant", "create", "--database-url", dbURL, "--name", "Stale Ring Shop"); err != nil {
		t.Fatalf("kadi merchant create: %v\nstderr: %s", err, errOut)
	}
	// Rotating from the copy that missed the rotation would give a new
	// key the id k1 the newer ring already uses: refused, file untouched.
	if _, errOut, err := runKadi(t, "secret", "rotate", "--database-url", dbURL, "--key-file", fileB); err == nil || !strings.Contains(string(errOut), "missed a rotation") {
		t.Errorf("kadi secret rotate from a ring behind: %v %s", err, errOut)
	}
	if got, _ := os.ReadFile(fileB); string(got) != old+"\n" {
		t.Errorf("the ring behind was rewritten: %q", got)
	}
	// The same copy in the environment: refused too, nothing printed.
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	t.Setenv("KADI_SECRET_KEY", old)
	if out, errOut, err := runKadi(t, "secret", "rotate", "--database-url", dbURL); err == nil || !strings.Contains(string(errOut), "missed a rotation") || len(out) > 0 {
		t.Errorf("kadi secret rotate from a ring behind, in the environment: %v %s %s", err, out, errOut)
	}
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", fileA)
	a := clusterStartNode(t, "A", dbURL, "")
	t.Setenv("KADI_SECRET_KEY_FILE", fileB)
	b := clusterStartNode(t, "B", dbURL, "")

	readyz := func(n *clusterNode) (int, string) {
		resp, err := http.Get(n.base + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var body struct{ Failed string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Failed
	}
	nodes := []*clusterNode{a, b}
	state := func() string {
		var out []string
		for _, n := range nodes {
			status, failed := readyz(n)
			out = append(out, fmt.Sprintf("%s %d %q missing %s", n.name, status, failed, metricValue(t, n.base+"/metrics", "kadi_master_keys_missing")))
		}
		return strings.Join(out, "; ")
	}
	clusterWait(t, 15*time.Second, "B to count A's key as missing", func() bool {
		return metricValue(t, b.base+"/metrics", "kadi_master_keys_missing") == "1"
	}, state)
	if status, failed := readyz(b); status != http.StatusOK {
		t.Errorf("B, behind one node of two, is not ready: %d %q", status, failed)
	}
	logs, _ := os.ReadFile(b.logPath)
	if !strings.Contains(string(logs), "master key ring behind some nodes") || !strings.Contains(string(logs), "(key k1)") ||
		!strings.Contains(string(logs), a.addr) {
		t.Errorf("B's log does not name A's node and key:\n%s", tail(logs, 10))
	}

	t.Setenv("KADI_SECRET_KEY_FILE", fileA)
	c := clusterStartNode(t, "C", dbURL, "")
	nodes = append(nodes, c)
	clusterWait(t, 15*time.Second, "B, behind two nodes of three, to be not ready", func() bool {
		status, failed := readyz(b)
		return status == http.StatusServiceUnavailable && failed == "keys"
	}, state)
	for _, n := range []*clusterNode{a, c} {
		if status, failed := readyz(n); status != http.StatusOK {
			t.Errorf("%s, which holds every key, is not ready: %d %q", n.name, status, failed)
		}
	}
	if got := metricValue(t, b.base+"/metrics", "kadi_master_keys_missing"); got != "2" {
		t.Errorf("B's kadi_master_keys_missing = %q, want 2", got)
	}

	// B's copy gets the new ring, written beside and renamed over.
	if err := os.WriteFile(fileB+".new", []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fileB+".new", fileB); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 15*time.Second, "B to be ready with the new ring", func() bool {
		status, _ := readyz(b)
		return status == http.StatusOK && metricValue(t, b.base+"/metrics", "kadi_master_keys_missing") == "0"
	}, state)
	logs, _ = os.ReadFile(b.logPath)
	if !strings.Contains(string(logs), "master key ring holds every node's key again") {
		t.Errorf("B does not say it caught up:\n%s", tail(logs, 10))
	}
}

// metricValue scrapes url and returns the value of the series named name
// (without labels); "" when it is not there.
func metricValue(t *testing.T, url, name string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// A ring restored from a copy taken before a rotation (allowed while
// nothing was re-sealed) rotates past the ids the database has seen: it
// took the rotation's id again for another key, and every command and
// kadi serve refused the database after.
func TestRestoredRingRotatesToANewID(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	dir := filepath.Join(t.TempDir(), "data")
	createMerchant(t, dir, "Restore Shop")
	ring := filepath.Join(dir, "secret.key")
	before, err := os.ReadFile(ring)
	if err != nil {
		t.Fatal(err)
	}
	kadi := func(want string, args ...string) {
		t.Helper()
		out, errOut, err := runKadi(t, args...)
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("kadi %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	}
	kadi("the current key is now k1", "secret", "rotate", "--data-dir", dir, "--reseal=false")
	kadi("Restore Shop", "merchant", "list", "--data-dir", dir)
	if err := os.WriteFile(ring, before, 0o600); err != nil {
		t.Fatal(err)
	}
	kadi("Restore Shop", "merchant", "list", "--data-dir", dir)
	kadi("the current key is now k2", "secret", "rotate", "--data-dir", dir)
	kadi("Restore Shop", "merchant", "list", "--data-dir", dir)
}

// A ring kept in KADI_SECRET_KEY is rotated by printing the new ring; the
// new key is recorded in the database at once, as a key file's rotation
// does. It was not: rotating twice from the same value gave two different
// keys the id k1, and a copy of the ring rotated to k1 passed the key check
// and sealed a merchant's secret no node could open (an operator's sweep).
func TestEnvRingRotationRecordsTheNewKey(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", strings.Repeat("ab", 32))
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	dir := filepath.Join(t.TempDir(), "data")
	createMerchant(t, dir, "Env Ring Shop")
	current := func() string {
		t.Helper()
		out, errOut, err := runKadi(t, "secret", "rotate", "--data-dir", dir)
		if err != nil {
			t.Fatalf("kadi secret rotate: %v\n%s", err, errOut)
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(string(out), "KADI_SECRET_KEY='"), " ")
		return id
	}
	if first, second := current(), current(); first != "k1" || second != "k2" {
		t.Errorf("two rotations from the same ring made %q then %q, want k1 then k2", first, second)
	}
}
