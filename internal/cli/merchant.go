package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kadipay/kadi/internal/form"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server"
)

func merchantCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	var name string
	var asJSON bool
	fs := newFlags("merchant create", stderr)
	st.register(fs)
	fs.StringVar(&name, "name", "", "the merchant's trading name (required)")
	fs.BoolVar(&asJSON, "json", false, "print the credentials as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" {
		return usageErr(fs, errors.New("--name is required"))
	}
	_, statErr := os.Stat(server.DatabaseURL(st.dataDir, ""))
	newDataDir := st.databaseURL == "" && errors.Is(statErr, os.ErrNotExist)
	db, err := st.open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	creds, err := merchant.Onboard(ctx, db, name, time.Now())
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(creds)
	}
	fmt.Fprintf(stdout, `Merchant %q created in %s. These secrets are shown once: store them now.

  merchant code (username)  %s
  password                  %s
  biller code               %s
  outlet code               %s
  paybill (serviceId)       %s
  till (systemCode)         %s
  settlement account        %s

  test API key              %s
  test notification secret  %s
  live API key              %s
  live notification secret  %s
`, name, redactURL(server.DatabaseURL(st.dataDir, st.databaseURL)), creds.MerchantCode, creds.Password, creds.BillerCode, creds.OutletCode, creds.ServiceID, creds.SystemCode,
		creds.SettlementAccount, creds.Test.APIKey, creds.Test.NotificationSecret, creds.Live.APIKey, creds.Live.NotificationSecret)
	if newDataDir {
		// A mistyped --data-dir makes a new install: credentials no
		// running gateway knows. Said where it cannot be missed.
		fmt.Fprintf(stdout, "\nThis made a NEW data dir, %s, with its own database and master key: kadi serve must run with --data-dir %s for this merchant to work.\n", st.dataDir, st.dataDir)
	}
	return nil
}

func merchantSetIPN(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ef endpointFlags
	var cfg merchant.IPNConfig
	var nat64 []netip.Prefix
	fs := newFlags("merchant set-ipn", stderr)
	ef.register(fs)
	nat64Flag(fs, &nat64)
	fs.StringVar(&cfg.URL, "url", "", "the merchant's IPN receiver URL (required)")
	fs.StringVar(&cfg.Username, "username", "", "Basic auth username sent with every IPN (required)")
	fs.StringVar(&cfg.Password, "password", "", "Basic auth password sent with every IPN (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := ef.check(fs)
	if err != nil {
		return err
	}
	code, st := ef.code, ef.st
	if cfg.Username == "" || cfg.Password == "" {
		return usageErr(fs, errors.New("--url, --username and --password are required"))
	}
	if err := ipn.CheckTarget(ctx, cfg.URL, m, net.DefaultResolver, nat64...); err != nil {
		return usageErr(fs, err)
	}
	if err := ipn.CheckUsername(cfg.Username); err != nil {
		return usageErr(fs, err)
	}
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	resent, err := db.SetIPN(ctx, code, m, cfg)
	if err != nil {
		return fmt.Errorf("merchant %s: %w", code, err)
	}
	fmt.Fprintf(stdout, "IPN for merchant %s (%s) now goes to %s\n", code, m, cfg.URL)
	if resent > 0 {
		fmt.Fprintln(stdout, ipn.ResentNote(resent))
	}
	if m == merchant.Test {
		if why := ipn.Unreachable(ctx, cfg.URL, net.DefaultResolver, nat64...); why != "" {
			fmt.Fprintf(stderr, "warning: %s: kadi serve refuses to deliver there unless it runs with --allow-private-ipn (test mode only)\n", why)
		}
	}
	return nil
}

func merchantRotateKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ef endpointFlags
	var asJSON bool
	fs := newFlags("merchant rotate-key", stderr)
	ef.register(fs)
	fs.BoolVar(&asJSON, "json", false, `print {"apiKey": …}`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := ef.check(fs)
	if err != nil {
		return err
	}
	code := ef.code
	db, err := ef.st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	key, err := merchant.RotateKey(ctx, db, code, m, time.Now())
	if err != nil {
		return fmt.Errorf("merchant %s: %w", code, err)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]string{"apiKey": key})
	}
	fmt.Fprintf(stdout, "New %s API key for merchant %s (shown once; the old key and its tokens no longer work):\n  %s\n", m, code, key)
	return nil
}

// maxSecretOverlap bounds how long a replaced notification secret may keep
// signing: a rotation is often for a secret that leaked, and one that signs
// for weeks is hardly rotated.
const maxSecretOverlap = 7 * 24 * time.Hour

// merchantRotateSecret replaces a mode's notification secret, as the
// dashboard's Developers page does, for operators and their scripts: the
// new one is printed once, and the replaced one keeps signing beside it
// for --overlap, so receivers can take the new one with nothing refused.
func merchantRotateSecret(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ef endpointFlags
	var overlap time.Duration
	var asJSON bool
	fs := newFlags("merchant rotate-secret", stderr)
	ef.register(fs)
	fs.DurationVar(&overlap, "overlap", 24*time.Hour, "how long the replaced secret keeps signing beside the new one (0: not at all, every receiver must have the new one at once; else from 1m to 168h)")
	fs.BoolVar(&asJSON, "json", false, `print {"notificationSecret": …, "previousSecretSignsUntil": …}`)
	loc := zoneFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := ef.check(fs)
	if err != nil {
		return err
	}
	// Under a minute an overlap would be over before a receiver could
	// be given the secret, and the time printed already past.
	if overlap != 0 && (overlap < time.Minute || overlap > maxSecretOverlap) {
		return usageErr(fs, fmt.Errorf("--overlap %s: give 0, or a time from 1m to %s", overlap, maxSecretOverlap))
	}
	db, err := ef.st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	s := secret.NewNotificationSecret()
	var until time.Time
	if overlap > 0 {
		until = time.Now().Add(overlap).Truncate(time.Second)
	}
	if err := db.SetNotificationSecret(ctx, ef.code, m, s, until); errors.Is(err, merchant.ErrNotFound) {
		return fmt.Errorf("no merchant %s in this database", ef.code)
	} else if err != nil {
		return fmt.Errorf("merchant %s: %w", ef.code, err)
	}
	if asJSON {
		out := struct {
			Secret string     `json:"notificationSecret"`
			Until  *time.Time `json:"previousSecretSignsUntil,omitempty"`
		}{Secret: s}
		if !until.IsZero() {
			out.Until = &until
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "New %s notification secret for merchant %s (shown once):\n  %s\n", m, ef.code, s)
	if until.IsZero() {
		fmt.Fprintln(stdout, "Notifications are signed with it only, from now on: give it to the merchant's receivers.")
	} else {
		// In the zone merchant show and ipn list print times in: it was UTC
		// beside their +0300.
		fmt.Fprintf(stdout, "The replaced secret also signs notifications until %s: give the new one to the merchant's receivers before then\n(kadi merchant end-secret-overlap stops the old one sooner).\n", stamp(until, *loc))
	}
	return nil
}

// merchantEndSecretOverlap stops a replaced notification secret signing
// before its overlap is over, once the receivers check the new one.
func merchantEndSecretOverlap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ef endpointFlags
	fs := newFlags("merchant end-secret-overlap", stderr)
	ef.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := ef.check(fs)
	if err != nil {
		return err
	}
	db, err := ef.st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	// Not "nothing to end" for a mistyped code: that would read as done.
	if _, err := db.MerchantByCode(ctx, ef.code); errors.Is(err, merchant.ErrNotFound) {
		return fmt.Errorf("no merchant %s in this database", ef.code)
	} else if err != nil {
		return err
	}
	ended, err := db.EndSecretOverlap(ctx, ef.code, m, time.Time{}, time.Now())
	if err != nil {
		return fmt.Errorf("merchant %s: %w", ef.code, err)
	}
	if !ended {
		fmt.Fprintf(stdout, "No replaced %s notification secret of merchant %s was signing: nothing changed.\n", m, ef.code)
		return nil
	}
	fmt.Fprintf(stdout, "The replaced %s notification secret of merchant %s no longer signs: notifications are signed with the current one only.\n", m, ef.code)
	return nil
}

// merchantResetAccess lets a merchant who lost its way into the dashboard
// back in: a new password (printed once), two-step verification turned
// off, or both; every dashboard session ends and the dashboard's locks
// and its API tokens' lock are lifted. The dashboard has no way to do this for itself: the person
// who lost the phone or the password is the one it would have to trust.
func merchantResetAccess(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	var code string
	var password, twoStep, asJSON bool
	fs := newFlags("merchant reset-access", stderr)
	st.register(fs)
	fs.StringVar(&code, "merchant", "", "merchant code (required)")
	fs.BoolVar(&password, "password", false, "replace the password with a new one, printed once (the merchant's token requests need it too)")
	fs.BoolVar(&twoStep, "two-step", false, "turn two-step verification off (its recovery codes too): the merchant signs in with the password and sets it up again")
	fs.BoolVar(&asJSON, "json", false, `print {"password": …} (with --password)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case code == "":
		return usageErr(fs, errors.New("--merchant is required"))
	case !password && !twoStep:
		return usageErr(fs, errors.New("say what to reset: --password, --two-step, or both"))
	}
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	var newPassword, hash string
	if password {
		newPassword = secret.NewPassword()
		hash = secret.HashPassword(newPassword)
	}
	if err := db.ResetAccess(ctx, code, hash, twoStep, time.Now()); err != nil {
		return fmt.Errorf("merchant %s: %w", code, err)
	}
	if asJSON {
		out := map[string]any{"merchantCode": code, "twoStepOff": twoStep}
		if password {
			out["password"] = newPassword
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if password {
		fmt.Fprintf(stdout, "New password for merchant %s (shown once; give it to the merchant by a channel you trust):\n  %s\n", code, newPassword)
		fmt.Fprintln(stdout, "Token requests with the old password now fail: the merchant's systems need the new one too.")
	}
	if twoStep {
		fmt.Fprintf(stdout, "Two-step verification is off for merchant %s: it signs in with its password and can set it up again under Security.\n", code)
	}
	fmt.Fprintln(stdout, "Every dashboard session of the merchant has ended; the dashboard's sign-in locks and the lock on its API tokens are lifted. Audited as merchant.access_reset.")
	return nil
}

// merchantSetCallbacks registers the origins a mode's hosted-form results
// may go back to; none (an empty --origins) lets any callbackUrl through,
// as before.
func merchantSetCallbacks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ef endpointFlags
	var list string
	fs := newFlags("merchant set-callbacks", stderr)
	ef.register(fs)
	fs.StringVar(&list, "origins", "", `the shop's origins, comma- or space-separated ("https://shop.example,https://www.shop.example"); empty: any callbackUrl`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := ef.check(fs)
	if err != nil {
		return err
	}
	code := ef.code
	origins, err := form.ParseCallbackOrigins(list, m)
	if err != nil {
		return usageErr(fs, err)
	}
	db, err := ef.st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.SetCallbackOrigins(ctx, code, m, origins); err != nil {
		return fmt.Errorf("merchant %s: %w", code, err)
	}
	if len(origins) == 0 {
		fmt.Fprintf(stdout, "Hosted-form results of merchant %s (%s) go back to any callbackUrl its forms name.\n", code, m)
		return nil
	}
	fmt.Fprintf(stdout, "Hosted-form results of merchant %s (%s) go back only to %s; a form naming another callbackUrl is refused (every node within a second).\n",
		code, m, strings.Join(origins, ", "))
	return nil
}

// merchantList prints the merchants, a page at a time in code order: how
// an operator finds a merchant's code to act on.
func merchantList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	var after string
	var limit int
	var asJSON bool
	fs := newFlags("merchant list", stderr)
	st.register(fs)
	fs.StringVar(&after, "after", "", "a merchant code: list the merchants after it (the next page)")
	fs.IntVar(&limit, "limit", 100, "merchants to list at most")
	fs.BoolVar(&asJSON, "json", false, "print a JSON array")
	tz := zoneFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	loc := *tz
	if limit < 1 {
		return usageErr(fs, errors.New("--limit must be at least 1"))
	}
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	ms, err := db.MerchantsAfter(ctx, after, limit)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]merchantJSON, 0, len(ms))
		for _, m := range ms {
			out = append(out, merchantJSON{Code: m.Code, Name: m.Name, BillerCode: m.BillerCode, CreatedAt: m.CreatedAt})
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if len(ms) == 0 {
		if after != "" {
			fmt.Fprintf(stdout, "No merchants after %s.\n", after)
			return nil
		}
		fmt.Fprintln(stdout, "No merchants yet: kadi merchant create adds one.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tNAME\tBILLER CODE\tCREATED")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Code, oneLine(m.Name, 60), m.BillerCode, stamp(m.CreatedAt, loc))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ms) == limit {
		where := fmt.Sprintf("--data-dir %q", st.dataDir)
		if st.databaseURL != "" {
			where = "--database-url …" // its password stays off the screen
		}
		fmt.Fprintf(stdout, "More may follow: kadi merchant list %s --limit %d --after %s\n", where, limit, ms[len(ms)-1].Code)
	}
	return nil
}

// merchantJSON is a merchant as merchant list and show print it: never a
// secret, a password or a key, only what tells the merchant apart and
// how it is set up.
type merchantJSON struct {
	Code       string              `json:"merchantCode"`
	Name       string              `json:"name"`
	BillerCode string              `json:"billerCode"`
	Outlets    []string            `json:"outlets,omitempty"`
	CreatedAt  time.Time           `json:"createdAt"`
	TwoStep    *bool               `json:"twoStepVerification,omitempty"`
	Modes      map[string]modeJSON `json:"modes,omitempty"`
}

type modeJSON struct {
	APIKeyPrefix    string    `json:"apiKeyPrefix"`
	IPNURL          string    `json:"ipnUrl"`
	IPNUsername     string    `json:"ipnUsername"`
	IPNDisabledAt   time.Time `json:"ipnDisabledAt,omitzero"`
	CallbackOrigins []string  `json:"callbackOrigins"`
	// PreviousSecretUntil is when a replaced notification secret stops
	// signing beside the current one; zero when none does.
	PreviousSecretUntil time.Time `json:"previousSecretSignsUntil,omitzero"`
}

// merchantShow prints how one merchant is set up, per mode, without any
// secret: what an operator checks before and after changing it.
func merchantShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	var code string
	var asJSON bool
	fs := newFlags("merchant show", stderr)
	st.register(fs)
	fs.StringVar(&code, "merchant", "", "merchant code (required)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	tz := zoneFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	loc := *tz
	if code == "" {
		return usageErr(fs, errors.New("--merchant is required"))
	}
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	m, err := db.MerchantByCode(ctx, code)
	if errors.Is(err, merchant.ErrNotFound) {
		return fmt.Errorf("no merchant %s in this database", code)
	} else if err != nil {
		return err
	}
	_, totpOn, err := db.TOTP(ctx, code)
	if err != nil {
		return err
	}
	twoStep := !totpOn.IsZero()
	out := merchantJSON{Code: m.Code, Name: m.Name, BillerCode: m.BillerCode, Outlets: m.Outlets, CreatedAt: m.CreatedAt,
		TwoStep: &twoStep, Modes: map[string]modeJSON{}}
	for _, mode := range merchant.Modes {
		key, err := db.ActiveAPIKey(ctx, code, mode)
		if err != nil && !errors.Is(err, merchant.ErrNotFound) {
			return err
		}
		s, err := db.Settings(ctx, code, mode)
		if err != nil {
			return fmt.Errorf("merchant %s %s settings: %w", code, mode, err)
		}
		md := modeJSON{APIKeyPrefix: key.Prefix, IPNURL: s.IPN.URL, IPNUsername: s.IPN.Username,
			IPNDisabledAt: s.IPN.DisabledAt, CallbackOrigins: append([]string{}, s.CallbackOrigins...)}
		if len(s.SigningSecrets(time.Now())) > 1 {
			md.PreviousSecretUntil = s.PreviousUntil
		}
		out.Modes[string(mode)] = md
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	onOff := map[bool]string{true: "on", false: "off (live mode in the dashboard needs it)"}
	fmt.Fprintf(tw, "Merchant %s\t%s\n  biller code\t%s\n  outlets\t%s\n  created\t%s\n  two-step verification\t%s\n",
		m.Code, oneLine(m.Name, 0), m.BillerCode, strings.Join(m.Outlets, ", "), stamp(m.CreatedAt, loc), onOff[twoStep])
	for _, mode := range merchant.Modes {
		md := out.Modes[string(mode)]
		ipnURL, origins := md.IPNURL, strings.Join(md.CallbackOrigins, ", ")
		switch {
		case ipnURL == "":
			ipnURL = "none set"
		case !md.IPNDisabledAt.IsZero():
			ipnURL += " (disabled by its 410 Gone at " + stamp(md.IPNDisabledAt, loc) + ")"
		}
		if origins == "" {
			origins = "any (none registered)"
		}
		username := md.IPNUsername
		if username == "" {
			username = "-"
		}
		prefix := md.APIKeyPrefix
		if prefix == "" {
			prefix = "none"
		} else {
			prefix += "…"
		}
		fmt.Fprintf(tw, "%s mode\t\n  API key\t%s\n  IPN URL\t%s\n  IPN username\t%s\n  callback origins\t%s\n", mode, prefix, ipnURL, username, origins)
		if !md.PreviousSecretUntil.IsZero() {
			fmt.Fprintf(tw, "  replaced secret\tsigns beside the current one until %s\n", stamp(md.PreviousSecretUntil, loc))
		}
	}
	return tw.Flush()
}

// endpointFlags are what every command acting on one mode of one merchant
// takes: the store's flags, --merchant and --mode.
type endpointFlags struct {
	st         storeFlags
	code, mode string
}

func (e *endpointFlags) register(fs *flag.FlagSet) {
	e.st.register(fs)
	fs.StringVar(&e.code, "merchant", "", "merchant code (required)")
	fs.StringVar(&e.mode, "mode", "", "test or live (required)")
}

// check reads --mode and requires --merchant, after parsing; a mistake is
// a usage error.
func (e *endpointFlags) check(fs *flag.FlagSet) (merchant.Mode, error) {
	if e.mode == "" {
		return "", usageErr(fs, errors.New("--mode is required: give test or live"))
	}
	m, err := merchant.ParseMode(e.mode)
	if err != nil {
		return "", usageErr(fs, fmt.Errorf("--mode %w", err))
	}
	if e.code == "" {
		return "", usageErr(fs, errors.New("--merchant is required"))
	}
	return m, nil
}
