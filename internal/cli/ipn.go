package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server"
)

func ipnCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return subcommandNeeded("ipn", args, stderr)
	}
	if isHelp(args[0]) {
		return groupHelp("ipn", stdout)
	}
	switch args[0] {
	case "list":
		return ipnList(ctx, args[1:], stdout, stderr)
	case "show":
		return ipnShow(ctx, args[1:], stdout, stderr)
	case "replay":
		return ipnReplay(ctx, args[1:], stdout, stderr)
	}
	return subcommandNeeded("ipn", args, stderr)
}

// eventJSON is an event as `--json` prints it.
type eventJSON struct {
	ID            string          `json:"id"`
	MerchantCode  string          `json:"merchantCode"`
	Mode          string          `json:"mode"`
	PaymentID     string          `json:"paymentId"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	Replays       int             `json:"replays"`
	CreatedAt     time.Time       `json:"createdAt"`
	NextAttemptAt *time.Time      `json:"nextAttemptAt,omitempty"`
	DeliveredAt   *time.Time      `json:"deliveredAt,omitempty"`
	LastError     string          `json:"lastError,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

type attemptJSON struct {
	Seq        int       `json:"seq"`
	At         time.Time `json:"at"`
	URL        string    `json:"url"`
	StatusCode int       `json:"statusCode"`
	LatencyMS  float64   `json:"latencyMs"`
	Error      string    `json:"error,omitempty"`
	Response   string    `json:"response,omitempty"`
}

func toJSON(ev ipn.Event, withPayload bool) eventJSON {
	out := eventJSON{ID: ev.ID, MerchantCode: ev.MerchantCode, Mode: string(ev.Mode), PaymentID: ev.PaymentID, Status: string(ev.Status),
		Attempts: ev.Attempts, Replays: ev.Replays, CreatedAt: ev.CreatedAt, LastError: ev.LastError}
	if ev.Status == ipn.Pending {
		out.NextAttemptAt = &ev.NextAttemptAt
	}
	if !ev.DeliveredAt.IsZero() {
		out.DeliveredAt = &ev.DeliveredAt
	}
	if withPayload && json.Valid(ev.Payload) {
		out.Payload = ev.Payload
	}
	return out
}

func ipnList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	var code, mode, status string
	var limit int
	var asJSON bool
	fs := newFlags("ipn list", stderr)
	st.register(fs)
	fs.StringVar(&code, "merchant", "", "merchant code (required)")
	fs.StringVar(&mode, "mode", "", "test or live (default both)")
	fs.StringVar(&status, "status", "", "pending, parked, delivered or failed (default all)")
	fs.IntVar(&limit, "limit", 100, "most recent events to show")
	before := fs.String("before", "", "an event id: show the events listed after it (the next page)")
	fs.BoolVar(&asJSON, "json", false, "print a JSON array")
	tz := zoneFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	loc := *tz
	f := ipn.Filter{MerchantCode: code, Status: ipn.Status(status), Limit: limit, Before: *before}
	if code == "" {
		return usageErr(fs, errors.New("--merchant is required"))
	}
	if mode != "" {
		m, err := merchant.ParseMode(mode)
		if err != nil {
			return usageErr(fs, err)
		}
		f.Mode = m
	}
	if _, err := ipn.ParseStatus(string(f.Status)); err != nil {
		return usageErr(fs, fmt.Errorf("--status %q: %w", status, err))
	}
	if limit < 1 {
		return usageErr(fs, errors.New("--limit must be at least 1"))
	}
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.MerchantByCode(ctx, code); errors.Is(err, merchant.ErrNotFound) {
		// Not "No IPN events.": a mistyped code would read as all is well.
		return fmt.Errorf("no merchant %s in this database", code)
	} else if err != nil {
		return err
	}
	if f.Before != "" {
		// Else a mistyped id answered "No IPN events.": all is well.
		if ev, err := db.IPNEvent(ctx, f.Before); errors.Is(err, ipn.ErrNotFound) || (err == nil && ev.MerchantCode != code) {
			return fmt.Errorf("--before %s: no such IPN event of merchant %s", f.Before, code)
		} else if err != nil {
			return err
		}
	}
	evs, err := db.IPNEvents(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]eventJSON, 0, len(evs))
		for _, ev := range evs {
			out = append(out, toJSON(ev, false))
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if len(evs) == 0 {
		fmt.Fprintln(stdout, "No IPN events.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODE\tSTATUS\tATTEMPTS\tCREATED\tNEXT / DELIVERED\tLAST ERROR")
	for _, ev := range evs {
		when := ""
		switch ev.Status {
		case ipn.Pending:
			when = "next " + stamp(ev.NextAttemptAt, loc)
		case ipn.Delivered:
			when = stamp(ev.DeliveredAt, loc)
		}
		// The error is the last column, whole: cut, it hid the receiver's
		// answer that says what to fix.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", ev.ID, ev.Mode, ev.Status, ev.Attempts, stamp(ev.CreatedAt, loc), when, oneLine(ev.LastError, 0))
	}
	return tw.Flush()
}

func ipnShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	var asJSON bool
	fs := newFlags("ipn show", stderr)
	st.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	tz := zoneFlag(fs)
	id, err := parseWithID(fs, args)
	if err != nil {
		return err
	}
	loc := *tz
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	ev, err := db.IPNEvent(ctx, id)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	atts, err := db.IPNAttempts(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		out := struct {
			eventJSON
			AttemptLog []attemptJSON `json:"attemptLog"`
		}{eventJSON: toJSON(ev, true), AttemptLog: []attemptJSON{}}
		for _, a := range atts {
			out.AttemptLog = append(out.AttemptLog, attemptJSON{Seq: a.Seq, At: a.At, URL: a.URL, StatusCode: a.StatusCode,
				LatencyMS: float64(a.Latency.Microseconds()) / 1000, Error: a.Error, Response: a.Response})
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "IPN event %s (webhook-id)\n\n", ev.ID)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  merchant\t%s (%s)\n  payment\t%s\n  status\t%s\n  attempts\t%d this round, %d replays\n  created\t%s\n",
		ev.MerchantCode, ev.Mode, ev.PaymentID, ev.Status, ev.Attempts, ev.Replays, stamp(ev.CreatedAt, loc))
	switch ev.Status {
	case ipn.Pending:
		fmt.Fprintf(tw, "  next attempt\t%s\n", stamp(ev.NextAttemptAt, loc))
	case ipn.Delivered:
		fmt.Fprintf(tw, "  delivered\t%s\n", stamp(ev.DeliveredAt, loc))
	}
	if ev.LastError != "" {
		fmt.Fprintf(tw, "  last error\t%s\n", oneLine(ev.LastError, 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, ev.Payload, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(ev.Payload)
	}
	fmt.Fprintf(stdout, "\nPayload:\n  %s\n\nAttempts:\n", pretty.String())
	if len(atts) == 0 {
		fmt.Fprintln(stdout, "  none yet")
		return nil
	}
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tAT\tHTTP\tLATENCY\tURL\tERROR\tRESPONSE")
	for _, a := range atts {
		code := "-"
		if a.StatusCode != 0 {
			code = fmt.Sprint(a.StatusCode)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Seq, stamp(a.At, loc), code, a.Latency.Round(time.Microsecond), a.URL,
			oneLine(a.Error, 80), oneLine(a.Response, 80))
	}
	return tw.Flush()
}

func ipnReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var st storeFlags
	fs := newFlags("ipn replay", stderr)
	st.register(fs)
	id, err := parseWithID(fs, args)
	if err != nil {
		return err
	}
	db, err := st.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	ev, err := db.ReplayIPN(ctx, id, time.Now(), "cli")
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	fmt.Fprintf(stdout, "IPN event %s of merchant %s (%s) queued for delivery again, with the same webhook-id; a running gateway sends it.\n",
		ev.ID, ev.MerchantCode, ev.Mode)
	return nil
}

// parseWithID reads "ID [flags]" or "[flags] ID": the flag package stops
// at the first argument that is not a flag, so the flags after the ID are
// parsed in a second pass (environment twins fill the rest).
func parseWithID(fs *flag.FlagSet, args []string) (string, error) {
	if err := quietParse(fs, func() error { return fs.Parse(args) }); err != nil {
		return "", err
	}
	rest := fs.Args()
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		return "", usageErr(fs, errors.New("the IPN event id (msg_…) is required"))
	}
	if err := parseFlags(fs, rest[1:]); err != nil {
		return "", err
	}
	return rest[0], nil
}

// zoneFlag registers --timezone, the zone times are shown in: the one
// kadi serve writes callbacks and IPN in (KADI_TIMEZONE is shared). An
// unknown zone is a usage mistake, caught as the flags are parsed.
func zoneFlag(fs *flag.FlagSet) **time.Location {
	name := server.Defaults().TimeZone
	loc, err := time.LoadLocation(name)
	if err != nil {
		loc = time.UTC // a system without zone data; a flag given says which
	}
	p := &loc
	fs.Func("timezone", "IANA time zone to show times in (default "+name+")", func(v string) error {
		l, err := time.LoadLocation(v)
		if err == nil {
			*p = l
		}
		return err
	})
	return p
}

func stamp(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format("2006-01-02 15:04:05.000 -0700")
}

// oneLine keeps a table row on one line, cut to max runes when max > 0.
// Control and bidirectional-override characters are shown as U+FFFD: a
// receiver's answer (an IPN attempt's response and error) is outside
// text, and an escape sequence in it acted on the operator's terminal.
func oneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' {
			return '\ufffd'
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); max > 0 && len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
