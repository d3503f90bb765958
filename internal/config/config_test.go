package config

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"addr":         "KADI_ADDR",
		"data-dir":     "KADI_DATA_DIR",
		"database-url": "KADI_DATABASE_URL",
		"ipn-workers":  "KADI_IPN_WORKERS",
	} {
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// settings is a small flag set with one flag of each kind the CLI uses.
type settings struct {
	addr    string
	dataDir string
	workers int
	debug   bool
	ttl     time.Duration
}

var envNames = []string{"KADI_ADDR", "KADI_DATA_DIR", "KADI_WORKERS", "KADI_DEBUG", "KADI_TOKEN_TTL"}

func newFlagSet() (*flag.FlagSet, *settings) {
	var s settings
	fs := flag.NewFlagSet("kadi serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&s.addr, "addr", ":8080", "listen address")
	fs.StringVar(&s.dataDir, "data-dir", "data", "data directory")
	fs.IntVar(&s.workers, "workers", 2, "IPN workers")
	fs.BoolVar(&s.debug, "debug", false, "debug logging")
	fs.DurationVar(&s.ttl, "token-ttl", time.Hour, "token lifetime")
	return fs, &s
}

func TestParse(t *testing.T) {
	defaults := settings{addr: ":8080", dataDir: "data", workers: 2, ttl: time.Hour}
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		want   settings
		errHas []string // substrings the error must contain; nil means success
	}{
		{"defaults", nil, nil, defaults, nil},
		{"env fills every unset flag",
			map[string]string{"KADI_ADDR": ":9090", "KADI_DATA_DIR": "/var/lib/kadi", "KADI_WORKERS": "8", "KADI_DEBUG": "true", "KADI_TOKEN_TTL": "2h"},
			nil, settings{addr: ":9090", dataDir: "/var/lib/kadi", workers: 8, debug: true, ttl: 2 * time.Hour}, nil},
		{"command line beats env",
			map[string]string{"KADI_ADDR": ":9090", "KADI_WORKERS": "8"},
			[]string{"--addr", ":7070"}, settings{addr: ":7070", dataDir: "data", workers: 8, ttl: time.Hour}, nil},
		{"command line beats env even when it repeats the default",
			map[string]string{"KADI_ADDR": ":9090"},
			[]string{"-addr=:8080"}, defaults, nil},
		{"bad env value of a flag given on the command line is never read",
			map[string]string{"KADI_WORKERS": "many"},
			[]string{"--workers=4"}, settings{addr: ":8080", dataDir: "data", workers: 4, ttl: time.Hour}, nil},
		// Named with the value and what was wanted: the flag package says
		// only "parse error".
		{"bad int in env", map[string]string{"KADI_WORKERS": "many"}, nil, settings{}, []string{`KADI_WORKERS="many"`, "want a whole number"}},
		{"bad duration in env", map[string]string{"KADI_TOKEN_TTL": "1 hour"}, nil, settings{}, []string{`KADI_TOKEN_TTL="1 hour"`, "want a duration such as 30s"}},
		{"bad bool in env", map[string]string{"KADI_DEBUG": "sometimes"}, nil, settings{}, []string{`KADI_DEBUG="sometimes"`, "want true or false"}},
		{"every bad env value is named",
			map[string]string{"KADI_WORKERS": "many", "KADI_TOKEN_TTL": "forever"}, nil, settings{}, []string{"KADI_WORKERS", "KADI_TOKEN_TTL"}},
		{"stray argument", nil, []string{"--addr=:7070", "extra"}, settings{}, []string{"extra"}},
		{"stray arguments", nil, []string{"serve", "now"}, settings{}, []string{"serve now"}},
		{"unknown flag", nil, []string{"--adr=:7070"}, settings{}, []string{"adr"}},
		{"bad flag value", nil, []string{"--workers=many"}, settings{}, []string{"workers"}},
		{"unrelated KADI_ variables are ignored", map[string]string{"KADI_SOMETHING_ELSE": "x"}, nil, defaults, nil},
		{"lower-case twin is not read", map[string]string{"kadi_addr": ":9090"}, nil, defaults, nil},
		{"an empty variable is an empty value", map[string]string{"KADI_ADDR": ""}, nil, settings{addr: "", dataDir: "data", workers: 2, ttl: time.Hour}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Start from a clean slate whatever the machine's environment
			// holds; t.Setenv restores it afterwards.
			for _, name := range append(envNames, "KADI_SOMETHING_ELSE", "kadi_addr") {
				t.Setenv(name, "")
				os.Unsetenv(name)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs, got := newFlagSet()
			err := Parse(fs, tt.args)
			if tt.errHas != nil {
				if err == nil {
					t.Fatalf("Parse(%q) succeeded with %+v, want an error", tt.args, *got)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if *got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.args, *got, tt.want)
			}
		})
	}
}
