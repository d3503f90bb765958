// Package config reads command-line flags and their KADI_* environment
// twins once, validates them and hands plain values to the rest.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// EnvName is the environment twin of a flag: --data-dir → KADI_DATA_DIR.
func EnvName(flagName string) string {
	return "KADI_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args into fs, then fills every flag not given on the command
// line from its environment twin. Command line beats environment. The flag
// package prints its own errors to fs.Output() (discard it to print them
// yourself); a bad environment value or a stray argument is only returned.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		// An empty variable is a value: KADI_METRICS_ALLOW= means nobody.
		// Flags that an empty value makes no sense for refuse it where
		// they are checked (--addr, --data-dir).
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w%s", EnvName(f.Name), v, err, expected(f)))
			}
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// expected says what a flag of f's kind takes, after the flag package's
// bare "parse error".
func expected(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return " (want a duration such as 30s, 5m or 1h)"
	case bool:
		return " (want true or false)"
	case int, int64, uint, uint64:
		return " (want a whole number)"
	case float64:
		return " (want a number such as 0.2)"
	}
	return ""
}
