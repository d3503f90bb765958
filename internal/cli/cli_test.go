package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad flag value or an unknown flag is said in one line, with the
// command's usage line and how to list its flags (exit status 2): the flag
// package printed every flag of the command after it, which buried it.
// -h still lists every flag, and exits 0.
func TestFlagMistakesAreSaidShortly(t *testing.T) {
	const everyFlag = "flags (each also read from its KADI_* environment twin)"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--token-ttl", "abc"}, `kadi serve: invalid value "abc" for flag -token-ttl`},
		{[]string{"serve", "--nope"}, "kadi serve: flag provided but not defined: -nope"},
		{[]string{"merchant", "create", "--json=maybe"}, `kadi merchant create: invalid boolean value "maybe" for -json`},
		{[]string{"merchant", "list", "--limit", "many"}, `kadi merchant list: invalid value "many" for flag -limit`},
		{[]string{"ipn", "show", "--json=maybe", "msg_1"}, `kadi ipn show: invalid boolean value "maybe" for -json`},
		{[]string{"ipn", "show", "msg_1", "--timezone", "Mars/Olympus"}, `kadi ipn show: invalid value "Mars/Olympus" for flag -timezone`},
		{[]string{"secret", "rotate", "--reseal=perhaps"}, `kadi secret rotate: invalid boolean value "perhaps" for -reseal`},
		{[]string{"merchant", "rotate-key", "--merchant", "1234567890"}, "kadi merchant rotate-key: --mode is required: give test or live"},
		{[]string{"merchant", "rotate-key", "--merchant", "1234567890", "--mode", "prod"}, `kadi merchant rotate-key: --mode "prod": mode must be test or live`},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(tt.args, &stdout, &stderr)
		command, _, _ := strings.Cut(tt.want, ":")
		hint := `Run "` + command + ` -h" for every flag.`
		out := stderr.String()
		if code != 2 || !strings.HasPrefix(out, tt.want) || !strings.Contains(out, hint) ||
			strings.Contains(out, everyFlag) || strings.Count(out, "\n") > 3 || stdout.Len() != 0 {
			t.Errorf("kadi %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), code, stdout.String(), out)
		}
	}
	for _, args := range [][]string{{"serve", "-h"}, {"merchant", "create", "--help"}, {"ipn", "show", "-h"}, {"ipn", "show", "msg_1", "-h"}} {
		var stdout, stderr bytes.Buffer
		code := Main(args, &stdout, &stderr)
		if code != 0 || !strings.Contains(stderr.String(), everyFlag) || !strings.Contains(stderr.String(), "  -data-dir string") {
			t.Errorf("kadi %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
		}
	}
}

// A rotation takes an id the database has not seen, so a database it is
// given must be reachable, --reseal=false too; told so, with how to rotate
// a copy of the ring apart from it, and the ring left as it was.
func TestRotateSaysTheDatabaseMustBeReachable(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	t.Setenv("KADI_DATABASE_URL", "")
	ring := filepath.Join(t.TempDir(), "ring")
	const key = "k0 " + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "\n"
	if err := os.WriteFile(ring, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main([]string{"secret", "rotate", "--reseal=false", "--key-file", ring, "--database-url", "postgres://postgres@127.0.0.1:1/nope?sslmode=disable&connect_timeout=2"}, &stdout, &stderr)
	if got, _ := os.ReadFile(ring); code != 1 || !strings.Contains(stderr.String(), "to rotate a copy of the ring apart from the database, give no --data-dir or --database-url") || string(got) != key {
		t.Errorf("exit %d, ring changed %v\n%s", code, string(got) != key, stderr.String())
	}
	// Apart from any database, the copy rotates.
	stdout.Reset()
	stderr.Reset()
	if code := Main([]string{"secret", "rotate", "--reseal=false", "--key-file", ring}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "the current key is now k1") {
		t.Errorf("a copy apart from the database: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}
