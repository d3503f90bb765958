package ipn_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/metrics"
	"github.com/kadipay/kadi/internal/outage/outagetest"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/store/storetest"
)

// One payment, one notification: sent once, with the merchant's Basic
// credentials, JSON, and a signature the client package verifies.
func TestDeliveredOnce(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	reg := metrics.New()
	m := ipn.NewMetrics(reg)
	stop := f.runWorker(t, fast(ipn.Config{}), m)

	b := f.pay(t, s)
	ev := f.event(t, s, b.Reference)
	waitFor(t, "delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()

	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("receiver got %d requests, want exactly 1", len(reqs))
	}
	r := reqs[0]
	if r.err != nil {
		t.Fatalf("client package refused the notification: %v", r.err)
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("shop-ipn:ipn-pass"))
	if got := r.header.Get("Authorization"); got != wantAuth {
		t.Errorf("Authorization %q, want %q", got, wantAuth)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if r.header.Get("webhook-id") != ev.ID || r.note.ID != ev.ID {
		t.Errorf("webhook-id %q, want the event id %s", r.header.Get("webhook-id"), ev.ID)
	}
	if string(r.body) != string(ev.Payload) {
		t.Errorf("body %s\nwant the outbox payload %s", r.body, ev.Payload)
	}
	if n := r.note; n.Transaction.BillNumber != b.Reference || n.Transaction.Amount != "1500.00" || n.CallbackType != "IPN" {
		t.Errorf("notification %+v", n)
	}

	got, _ := f.db.IPNEvent(t.Context(), ev.ID)
	if got.Attempts != 1 || got.DeliveredAt.IsZero() || got.LastError != "" {
		t.Errorf("event after delivery: %+v", got)
	}
	atts := f.attempts(t, ev.ID)
	if len(atts) != 1 || atts[0].StatusCode != http.StatusNoContent || atts[0].Error != "" || atts[0].URL != rc.URL+"/kadi/ipn" {
		t.Errorf("attempt log %+v", atts)
	}

	read := time.Unix(1_795_000_000, 500_000_000)
	if err := m.Refresh(t.Context(), f.db, read); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = reg.WriteText(&text)
	for _, want := range []string{
		`kadi_ipn_deliveries_total{outcome="delivered"} 1`,
		`kadi_ipn_delivery_duration_seconds_count 1`,
		"kadi_ipn_queue_depth 0\n",
		"kadi_ipn_oldest_pending_age_seconds 0\n",
		// When they were read: during an outage they keep their values.
		"kadi_ipn_queue_read_timestamp_seconds 1.7950000005e+09\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, text.String())
		}
	}
}

// A receiver failing N times then succeeding gets N+1 requests, all with
// one webhook-id and each with a valid signature of its own timestamp.
func TestRetriesUntilSuccess(t *testing.T) {
	const failures = 3
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		switch {
		case n == 1:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(strings.Repeat("x", 5000))) // only 1 KiB of this is kept
			return true
		case n <= failures:
			http.Error(w, "try later ✗", http.StatusBadGateway)
			return true
		}
		return false
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	stop := f.runWorker(t, fast(ipn.Config{}), nil)

	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "delivery after retries", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()

	reqs := rc.requests()
	if len(reqs) != failures+1 {
		t.Fatalf("receiver got %d requests, want %d", len(reqs), failures+1)
	}
	for i, r := range reqs {
		if r.header.Get("webhook-id") != ev.ID {
			t.Errorf("request %d: webhook-id %q, want %s on every retry", i+1, r.header.Get("webhook-id"), ev.ID)
		}
		if r.err != nil {
			t.Errorf("request %d: signature not valid: %v", i+1, r.err)
		}
	}
	atts := f.attempts(t, ev.ID)
	if len(atts) != failures+1 {
		t.Fatalf("%d attempts logged, want %d", len(atts), failures+1)
	}
	wantCodes := []int{500, 502, 502, 204}
	for i, a := range atts {
		if a.StatusCode != wantCodes[i] || a.Seq != i+1 {
			t.Errorf("attempt %d: seq %d status %d, want %d", i+1, a.Seq, a.StatusCode, wantCodes[i])
		}
	}
	if len(atts[0].Response) != ipn.MaxResponseExcerpt {
		t.Errorf("response excerpt of %d bytes, want it bounded to %d", len(atts[0].Response), ipn.MaxResponseExcerpt)
	}
	if atts[1].Response != "try later ✗\n" || atts[1].Error != "HTTP 502" {
		t.Errorf("attempt 2 logged as %+v", atts[1])
	}
	if got, _ := f.db.IPNEvent(t.Context(), ev.ID); got.Attempts != failures+1 {
		t.Errorf("event counts %d attempts", got.Attempts)
	}
}

// A 3xx is a failed attempt, never followed; when the schedule is used up
// the event is failed.
func TestRedirectFailsAndScheduleEnds(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/kadi/ipn" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return true
		}
		return false
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	stop := f.runWorker(t, fast(ipn.Config{Schedule: ipn.Schedule{10 * time.Millisecond, 10 * time.Millisecond}}), nil)

	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "failed status", f.statusIs(t, ev.ID, ipn.Failed))
	stop()

	for _, r := range rc.requests() {
		if r.header.Get("webhook-id") == "" || strings.Contains(r.header.Get("Referer"), "elsewhere") {
			t.Errorf("unexpected request %v", r.header)
		}
	}
	if n := len(rc.requests()); n != 3 {
		t.Errorf("receiver got %d requests, want 3 (first try and two retries), none following the redirect", n)
	}
	atts := f.attempts(t, ev.ID)
	if len(atts) != 3 {
		t.Fatalf("%d attempts logged", len(atts))
	}
	for _, a := range atts {
		if a.StatusCode != http.StatusFound || !strings.Contains(a.Error, "redirect") {
			t.Errorf("attempt %+v", a)
		}
	}
	got, _ := f.db.IPNEvent(t.Context(), ev.ID)
	if !strings.Contains(got.LastError, "gave up after 3 attempts") {
		t.Errorf("last error %q", got.LastError)
	}
}

// 410 Gone disables the endpoint: its events are parked, unsent, until the
// merchant saves the IPN configuration again.
func TestGoneDisablesEndpoint(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			w.WriteHeader(http.StatusGone)
			return true
		}
		return false
	})
	url := rc.URL + "/kadi/ipn"
	f.setIPN(t, s.Code, url)
	stop := f.runWorker(t, fast(ipn.Config{}), nil)

	first := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "endpoint disabled", func() bool {
		st, err := f.db.Settings(t.Context(), s.Code, merchant.Test)
		return err == nil && !st.IPN.DisabledAt.IsZero()
	})
	second := f.event(t, s, f.pay(t, s).Reference)
	for _, id := range []string{first.ID, second.ID} {
		waitFor(t, "the event to be parked", f.statusIs(t, id, ipn.Parked))
	}
	if ev, _ := f.db.IPNEvent(t.Context(), second.ID); !strings.Contains(ev.LastError, "disabled after 410 Gone") {
		t.Errorf("second event parked because %q", ev.LastError)
	}
	// The queue hands out none of them, however late it is.
	now := time.Now().Add(48 * time.Hour)
	if got, err := f.db.ClaimIPN(t.Context(), ipn.Claim{Owner: "probe", Now: now, LeaseUntil: now, Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("disabled endpoint's events claimable: %d, %v", len(got), err)
	}
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("receiver got %d requests while disabled", n)
	}

	f.setIPN(t, s.Code, url) // the merchant saves the configuration again
	waitFor(t, "first delivered", f.statusIs(t, first.ID, ipn.Delivered))
	waitFor(t, "second delivered", f.statusIs(t, second.ID, ipn.Delivered))
	stop()
	if n := len(rc.requests()); n != 3 {
		t.Errorf("receiver got %d requests, want 3 (the 410, then each event once)", n)
	}
}

// 429 and 503 with Retry-After wait at least that long, though the
// schedule says 20 ms; seconds and HTTP dates are both understood.
func TestRetryAfter(t *testing.T) {
	f := newFixture(t)
	mk := func(status int, retryAfter func() string) shop {
		s := f.shop(t, "")
		rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				w.Header().Set("Retry-After", retryAfter())
				w.WriteHeader(status)
				return true
			}
			return false
		})
		f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
		return s
	}
	seconds := mk(http.StatusTooManyRequests, func() string { return "1" })
	date := mk(http.StatusServiceUnavailable, func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) })
	stop := f.runWorker(t, fast(ipn.Config{}), nil)

	evs := map[string]time.Duration{ // at least this long between the attempts
		f.event(t, seconds, f.pay(t, seconds).Reference).ID: time.Second,
		f.event(t, date, f.pay(t, date).Reference).ID:       2 * time.Second, // the date has whole seconds
	}
	for id := range evs {
		waitFor(t, "delivery", f.statusIs(t, id, ipn.Delivered))
	}
	stop()
	for id, min := range evs {
		atts := f.attempts(t, id)
		if len(atts) != 2 {
			t.Fatalf("%d attempts, want 2", len(atts))
		}
		// Stored times have millisecond resolution.
		if gap := atts[1].At.Sub(atts[0].At); gap < min-time.Millisecond {
			t.Errorf("retried after %s, want at least %s (Retry-After)", gap, min)
		}
	}
}

// A receiver that never answers is cut off at the timeout (15 s by
// default; shortened here), the attempt counts as failed, and the retry
// delivers.
func TestHungReceiverTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			<-r.Context().Done() // hangs until the gateway gives up
			return true
		}
		return false
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	stop := f.runWorker(t, fast(ipn.Config{Timeout: timeout}), nil)

	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "delivery after the hang", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	atts := f.attempts(t, ev.ID)
	if len(atts) != 2 {
		t.Fatalf("%d attempts, want 2", len(atts))
	}
	hung := atts[0]
	if hung.StatusCode != 0 || !strings.Contains(hung.Error, "no answer within 300ms") || hung.Latency < timeout {
		t.Errorf("hung attempt logged as %+v", hung)
	}
	if atts[1].StatusCode != http.StatusNoContent {
		t.Errorf("retry logged as %+v", atts[1])
	}
}

// Merchant A's receiver hangs; merchant B's notification is delivered
// while A's requests are still hanging, and A never holds more than its
// per-merchant share of the pool.
func TestHungMerchantDoesNotDelayOthers(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }

	a := f.shop(t, "")
	rcA := newReceiver(t, a, func(n int, w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	})
	f.setIPN(t, a.Code, rcA.URL+"/kadi/ipn")
	b := f.shop(t, "")
	rcB := newReceiver(t, b, nil)
	f.setIPN(t, b.Code, rcB.URL+"/kadi/ipn")

	var aEvents []string
	for range 6 {
		aEvents = append(aEvents, f.event(t, a, f.pay(t, a).Reference).ID)
	}
	stop := f.runWorker(t, fast(ipn.Config{Workers: 4, PerEndpoint: 2, Timeout: 10 * time.Minute}), nil)
	t.Cleanup(unblock) // runs before the worker's stop, which waits for A's requests

	waitFor(t, "A's receiver holding its requests", func() bool { return rcA.inFlight.Load() >= 2 })
	evB := f.event(t, b, f.pay(t, b).Reference)
	waitFor(t, "B's delivery", f.statusIs(t, evB.ID, ipn.Delivered))

	if n := rcA.inFlight.Load(); n != 2 {
		t.Errorf("A has %d requests in flight once B is delivered, want still 2", n)
	}
	for _, id := range aEvents {
		if ev, _ := f.db.IPNEvent(t.Context(), id); ev.Status != ipn.Pending {
			t.Errorf("A's event %s is %s while A hangs", id, ev.Status)
		}
	}

	unblock()
	for _, id := range aEvents {
		waitFor(t, "A's deliveries after it recovers", f.statusIs(t, id, ipn.Delivered))
	}
	stop()
	if n := rcA.maxIn.Load(); n > 2 {
		t.Errorf("A had %d requests in flight at once; the per-merchant cap is 2", n)
	}
	if n := len(rcA.requests()); n != len(aEvents) {
		t.Errorf("A got %d requests for %d events", n, len(aEvents))
	}
}

// What the worker logs of a receiver when it becomes slow to the node:
// operators' alerts match these lines.
const (
	notAnsweringMsg = "IPN receiver not answering: nothing claimed ahead for it on this node, and one request at a time while half the node's slots are taken, until it answers in time"
	slowMsg         = "IPN receiver slow to answer: nothing claimed ahead for it on this node, and one request at a time while half the node's slots are taken, until it answers in time"
)

// Receivers that hang, or answer only after a third of the timeout, get
// one request at a time once they have: a merchant whose receiver answers
// at once has its notification sent while their backlogs wait, and once
// they answer in time their share is back.
func TestSlowReceiversLeaveSlotsForOthers(t *testing.T) {
	const timeout = 3 * time.Second // answers within 1 s are in time
	for name, tc := range map[string]struct {
		delay  time.Duration // how long A and C take to answer; 0: they hang
		slow   string        // what the worker logs of them
		before int32         // A's requests before B's notification, at most
	}{
		"hung": {slow: notAnsweringMsg, before: 4},
		// Each answer is a delivery: A's first two, then one at a time.
		"late": {delay: 1500 * time.Millisecond, slow: slowMsg, before: 4},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			release := make(chan struct{})
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			// A's late answers also wait until C holds its slots: on a
			// busy machine C's payments took longer than A's answers, A
			// was cut to one at a time, and the moment when both hold
			// every slot never came.
			cHolds := make(chan struct{})
			stall := func(r *http.Request, afterC bool) {
				var answer <-chan time.Time // nil: hangs
				if tc.delay > 0 {
					answer = time.After(tc.delay)
				}
				select {
				case <-release:
					return
				case <-answer:
				case <-r.Context().Done():
					return
				}
				if afterC {
					select {
					case <-cHolds:
					case <-r.Context().Done():
					}
				}
			}
			// Once A answers in time, each answer takes a moment, so
			// that its requests overlap if its share allows.
			var answering atomic.Bool
			var afterIn, afterMax atomic.Int32
			a := f.shop(t, "")
			rcA := newReceiver(t, a, func(n int, w http.ResponseWriter, r *http.Request) bool {
				if !answering.Load() {
					stall(r, true)
					return false
				}
				in := afterIn.Add(1)
				defer afterIn.Add(-1)
				for m := afterMax.Load(); in > m && !afterMax.CompareAndSwap(m, in); m = afterMax.Load() {
				}
				time.Sleep(30 * time.Millisecond)
				return false
			})
			f.setIPN(t, a.Code, rcA.URL+"/kadi/ipn")
			c := f.shop(t, "")
			rcC := newReceiver(t, c, func(n int, w http.ResponseWriter, r *http.Request) bool { stall(r, false); return false })
			f.setIPN(t, c.Code, rcC.URL+"/kadi/ipn")
			b := f.shop(t, "")
			rcB := newReceiver(t, b, nil)
			f.setIPN(t, b.Code, rcB.URL+"/kadi/ipn")

			// Enough that, once they answer in time, each has more than
			// the answers its share waits for (inTimeToRecover) left.
			var aEvents []string
			for range 12 {
				aEvents = append(aEvents, f.event(t, a, f.pay(t, a).Reference).ID)
			}
			logs := &messages{}
			stop := run(t, &ipn.Worker{Queue: f.db, Config: fast(ipn.Config{Workers: 4, PerEndpoint: 2, Timeout: timeout}), Log: slog.New(logs)})
			t.Cleanup(unblock) // before the worker's stop, which waits for the requests in flight

			// C's requests start a while after A's, so that C still holds
			// half the node's slots when A's end and B's starts: the cut
			// to one is for a node whose slots run short, and were A's and
			// C's to end together, an idle node would rightly give A its
			// share of two again.
			waitFor(t, "A holding its share", func() bool { return rcA.inFlight.Load() == 2 })
			time.Sleep(time.Second)
			for range 12 {
				f.pay(t, c)
			}
			waitFor(t, "A and C holding every slot", func() bool { return rcA.inFlight.Load() == 2 && rcC.inFlight.Load() == 2 })
			close(cHolds)
			evB := f.event(t, b, f.pay(t, b).Reference)
			waitFor(t, "B's delivery", f.statusIs(t, evB.ID, ipn.Delivered))
			if n := rcA.n.Load(); n > tc.before {
				t.Errorf("A's receiver got %d requests before B's notification went out, want at most %d (two, then one at a time)", n, tc.before)
			}
			nA, nC := rcA.inFlight.Load(), rcC.inFlight.Load()
			if nC != 2 {
				t.Errorf("B's notification went out only once C's first requests had ended (C has %d in flight), want while A's end", nC)
			}
			if nA > 1 {
				t.Errorf("A has %d requests in flight after it became slow, while C holds half the slots; want at most 1", nA)
			}

			waitFor(t, "C slow too", func() bool { return logs.count(tc.slow) == 2 })
			answering.Store(true)
			unblock()
			for _, id := range aEvents {
				waitFor(t, "A's deliveries once it answers in time", f.statusIs(t, id, ipn.Delivered))
			}
			waitFor(t, "C answering in time again", func() bool { return logs.count("IPN receiver answering in time again") >= 2 })
			stop()
			if n := afterMax.Load(); n != 2 {
				t.Errorf("A had at most %d requests in flight once it answered in time again, want its share of 2", n)
			}
			// Each moment is said once an endpoint: A and C become slow,
			// then both answer in time again (C once it is released too).
			for msg, want := range map[string]int{tc.slow: 2, "IPN receiver answering in time again": 2} {
				if n := logs.count(msg); n != want {
					t.Errorf("logged %q %d times, want %d", msg, n, want)
				}
			}
		})
	}
}

// A receiver that answers late still gets its share from a node whose
// slots are mostly free: the cut is for fairness, and with nobody else
// waiting it only held a slow merchant's notifications to one at a time.
func TestSlowReceiverKeepsItsShareOnAnIdleNode(t *testing.T) {
	f := newFixture(t)
	logs := &messages{}
	var afterIn, afterMax atomic.Int32
	a := f.shop(t, "")
	rc := newReceiver(t, a, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if logs.count(slowMsg) > 0 {
			in := afterIn.Add(1)
			defer afterIn.Add(-1)
			for m := afterMax.Load(); in > m && !afterMax.CompareAndSwap(m, in); m = afterMax.Load() {
			}
		}
		time.Sleep(900 * time.Millisecond) // late: a third of the 2 s timeout is 667 ms
		return false
	})
	f.setIPN(t, a.Code, rc.URL+"/kadi/ipn")
	var ids []string
	for range 8 {
		ids = append(ids, f.event(t, a, f.pay(t, a).Reference).ID)
	}
	stop := run(t, &ipn.Worker{Queue: f.db, Config: fast(ipn.Config{Workers: 8, PerEndpoint: 2, Timeout: 2 * time.Second}), Log: slog.New(logs)})
	for _, id := range ids {
		waitFor(t, "the slow receiver's deliveries", f.statusIs(t, id, ipn.Delivered))
	}
	stop()
	if logs.count(slowMsg) != 1 {
		t.Fatalf("logged %q %d times, want once", slowMsg, logs.count(slowMsg))
	}
	if n := afterMax.Load(); n != 2 {
		t.Errorf("at most %d requests in flight to the slow receiver on an idle node, want its share of 2", n)
	}
}

// An answer's time runs to the end of its body: a receiver that sends its
// headers at once and its body late holds the slot as long as one that
// answers late, and is as slow.
func TestAnAnswersBodyCountsInItsTime(t *testing.T) {
	f := newFixture(t)
	logs := &messages{}
	a := f.shop(t, "")
	rc := newReceiver(t, a, func(n int, w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(900 * time.Millisecond) // a third of the 2 s timeout is 667 ms
		_, _ = w.Write([]byte("ok"))
		return true
	})
	f.setIPN(t, a.Code, rc.URL+"/kadi/ipn")
	ev := f.event(t, a, f.pay(t, a).Reference)
	stop := run(t, &ipn.Worker{Queue: f.db, Config: fast(ipn.Config{Timeout: 2 * time.Second}), Log: slog.New(logs)})
	waitFor(t, "the delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	if n := logs.count(slowMsg); n != 1 {
		t.Errorf("logged %q %d times, want once: the body came 900 ms after the headers", slowMsg, n)
	}
	if atts := f.attempts(t, ev.ID); len(atts) != 1 || atts[0].Latency < 900*time.Millisecond {
		t.Errorf("attempts %+v, want one whose latency covers the body", atts)
	}
}

// messages records the messages logged, and each as a line "LEVEL
// message" with the attempt's recorded attribute, for has.
type messages struct {
	slog.Handler // WithAttrs, WithGroup: not used by the worker
	mu           sync.Mutex
	said         []string
	lines        []string
}

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }

func (m *messages) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "recorded" {
			line += " recorded=" + a.Value.String()
		}
		return true
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	m.said = append(m.said, r.Message)
	m.lines = append(m.lines, line)
	return nil
}

// has reports whether a line begins with prefix.
func (m *messages) has(prefix string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.lines {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func (m *messages) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.lines, "\n")
}

func (m *messages) count(msg string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.said {
		if s == msg {
			n++
		}
	}
	return n
}

// A rotated notification secret signs beside the new one until its
// overlap ends: a receiver still on the old secret accepts the
// notifications meanwhile, one on the new secret too, and once the old
// one no longer signs the receiver on it refuses them.
func TestRotatedSecretSignsUntilItsOverlapEnds(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil) // verifies with the secret before the rotation
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	ctx := t.Context()
	fresh := secret.NewNotificationSecret()
	if err := f.db.SetNotificationSecret(ctx, s.Code, merchant.Test, fresh, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	stop := f.runWorker(t, fast(ipn.Config{}), nil)
	defer stop()
	during := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "the delivery during the overlap", f.statusIs(t, during.ID, ipn.Delivered))
	got := rc.requests()
	if len(got) != 1 || got[0].err != nil {
		t.Fatalf("the receiver on the old secret, during the overlap: %d requests, %v", len(got), got[0].err)
	}
	if sigs := strings.Fields(got[0].header.Get(ipn.HeaderSignature)); len(sigs) != 2 {
		t.Errorf("%d signatures during the overlap, want 2: %q", len(sigs), sigs)
	}
	onNew, err := client.NewIPNHandler(client.IPNConfig{Secret: fresh, Username: "shop-ipn", Password: "ipn-pass"},
		func(context.Context, client.Notification) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onNew.Verify(got[0].header, got[0].body); err != nil {
		t.Errorf("a receiver on the new secret refused it: %v", err)
	}

	// Rotated again, without an overlap: only the newest signs.
	if err := f.db.SetNotificationSecret(ctx, s.Code, merchant.Test, secret.NewNotificationSecret(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	after := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "an attempt after the overlap", func() bool { return len(f.attempts(t, after.ID)) > 0 })
	if a := f.attempts(t, after.ID)[0]; a.StatusCode != http.StatusUnauthorized {
		t.Errorf("the receiver on the retired secret answered %d, want 401", a.StatusCode)
	}
	if got := rc.requests(); len(got) < 2 || len(strings.Fields(got[1].header.Get(ipn.HeaderSignature))) != 1 {
		t.Errorf("signatures after the overlap: %+v", got)
	}
}

// Without an IPN URL an event is parked: no attempt used up, not claimed
// again, and not counted as waiting (the alert on the oldest pending event
// is about receivers and nodes, not about merchants that set no URL; such
// events were re-claimed every minute for ever). Saving a configuration
// sends the parked events of the last three days, at the URL saved; an
// older one goes only by replay.
func TestParksWithoutAnEndpoint(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	reg := metrics.New()
	m := ipn.NewMetrics(reg)
	stop := f.runWorker(t, fast(ipn.Config{Defer: 20 * time.Millisecond}), m)

	recent := f.event(t, s, f.payAt(t, s, time.Now().Add(-time.Minute)).Reference)
	old := f.event(t, s, f.payAt(t, s, time.Now().Add(-ipn.ParkedResendWindow-time.Hour)).Reference)
	for _, ev := range []ipn.Event{recent, old} {
		waitFor(t, "the event to be parked", f.statusIs(t, ev.ID, ipn.Parked))
		got, _ := f.db.IPNEvent(t.Context(), ev.ID)
		if got.Attempts != 0 || !strings.Contains(got.LastError, "no IPN URL configured for test mode") || !strings.Contains(got.LastError, "saved within 3 days") {
			t.Fatalf("parked event %+v", got)
		}
	}
	// A park is counted once it is stored (worker.go): just after the
	// status reads parked, the count may not have caught up yet.
	var text strings.Builder
	waitFor(t, "both parks counted", func() bool {
		text.Reset()
		_ = reg.WriteText(&text)
		return strings.Contains(text.String(), `kadi_ipn_deliveries_total{outcome="parked"} 2`)
	})
	if err := m.Refresh(t.Context(), f.db, time.Now()); err != nil {
		t.Fatal(err)
	}
	text.Reset()
	_ = reg.WriteText(&text)
	for _, want := range []string{"kadi_ipn_queue_depth 0\n", `kadi_ipn_deliveries_total{outcome="parked"} 2`, "kadi_ipn_oldest_pending_age_seconds 0\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics while parked lack %q:\n%s", want, text.String())
		}
	}

	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	waitFor(t, "delivery once configured", f.statusIs(t, recent.ID, ipn.Delivered))
	if got, _ := f.db.IPNEvent(t.Context(), old.ID); got.Status != ipn.Parked {
		t.Errorf("an event older than %s was resent by the save: %s", ipn.ParkedResendWindow, got.Status)
	}
	if _, err := f.db.ReplayIPN(t.Context(), old.ID, time.Now(), "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old event's delivery on replay", f.statusIs(t, old.ID, ipn.Delivered))
	stop()
	if n := len(rc.requests()); n != 2 {
		t.Errorf("%d requests, want one for each event", n)
	}
}

// A payment whose merchant has no endpoint stores its notification
// parked: no worker claims it and writes it again (which cost every such
// payment two writes), and it is counted parked once. A replay while there
// is still no endpoint goes to the worker, which parks it again.
func TestParkedAsQueued(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	reg := metrics.New()
	f.metrics = ipn.NewMetrics(reg) // and no worker running
	ev := f.event(t, s, f.pay(t, s).Reference)
	if ev.Status != ipn.Parked || ev.Attempts != 0 || ev.LastError != ipn.ParkedNote("no IPN URL configured for test mode") {
		t.Fatalf("the notification of a payment without an IPN URL: %+v", ev)
	}
	parked := func(n int) func() bool {
		return func() bool {
			var text strings.Builder
			_ = reg.WriteText(&text)
			return strings.Contains(text.String(), fmt.Sprintf(`kadi_ipn_deliveries_total{outcome="parked"} %d`+"\n", n))
		}
	}
	if !parked(1)() {
		t.Error("the park is not counted")
	}
	if _, err := f.db.ReplayIPN(t.Context(), ev.ID, time.Now(), "test"); err != nil {
		t.Fatal(err)
	}
	stop := f.runWorker(t, fast(ipn.Config{}), f.metrics)
	waitFor(t, "the replayed event to be parked", f.statusIs(t, ev.ID, ipn.Parked))
	waitFor(t, "the second park counted", parked(2))
	stop()
	if got, _ := f.db.IPNEvent(t.Context(), ev.ID); got.Attempts != 0 || got.Replays != 1 {
		t.Errorf("after the replay: %+v", got)
	}
}

func TestNoEndpoint(t *testing.T) {
	disabled := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		cfg  merchant.IPNConfig
		mode merchant.Mode
		why  string
	}{
		{merchant.IPNConfig{}, merchant.Test, "no IPN URL configured for test mode"},
		{merchant.IPNConfig{}, merchant.Live, "no IPN URL configured for live mode"},
		{merchant.IPNConfig{DisabledAt: disabled}, merchant.Live, "no IPN URL configured for live mode"},
		{merchant.IPNConfig{URL: "https://shop.example/ipn", DisabledAt: disabled}, merchant.Test, "IPN endpoint disabled after 410 Gone"},
		{merchant.IPNConfig{URL: "https://shop.example/ipn"}, merchant.Test, ""},
	} {
		why, ok := ipn.NoEndpoint(tc.cfg, tc.mode)
		if why != tc.why || ok != (tc.why != "") {
			t.Errorf("NoEndpoint(%+v, %s) = %q, %t; want %q", tc.cfg, tc.mode, why, ok, tc.why)
		}
	}
}

// A URL saved by another process (kadi merchant set-ipn beside kadi serve)
// sends the parked events, though this node still holds the settings it
// read before: a park on that stale view makes the event due again and
// drops the view, where each was parked and made due again, over and over,
// thousands of times, until the view aged out.
func TestSaveElsewhereSendsParkedAtOnce(t *testing.T) {
	f, other := twoNodes(t, filepath.Join(t.TempDir(), "kadi.db"))
	s := f.shop(t, "")
	reg := metrics.New()
	m := ipn.NewMetrics(reg)
	stop := f.runWorker(t, fast(ipn.Config{}), m)
	const n = 20
	var evs []ipn.Event
	for range n {
		evs = append(evs, f.event(t, s, f.pay(t, s).Reference))
	}
	for _, ev := range evs {
		waitFor(t, "the event to be parked", f.statusIs(t, ev.ID, ipn.Parked))
	}
	rc := newReceiver(t, s, nil)
	if resent, err := other.SetIPN(t.Context(), s.Code, merchant.Test, merchant.IPNConfig{URL: rc.URL + "/kadi/ipn", Username: "shop-ipn", Password: "ipn-pass"}); err != nil || resent != n {
		t.Fatalf("save elsewhere: %d resent, %v", resent, err)
	}
	for _, ev := range evs {
		waitFor(t, "delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	}
	stop()
	var text strings.Builder
	_ = reg.WriteText(&text)
	want := fmt.Sprintf(`kadi_ipn_deliveries_total{outcome="parked"} %d`+"\n", n)
	if !strings.Contains(text.String(), want) {
		t.Errorf("want %q (each parked once):\n%s", want, text.String())
	}
}

// A receiver that fails at once never fills its share of requests in
// flight, so its backlog was never skipped, and the poll read the oldest
// due events of all: another merchant's notification waited until every
// event of the backlog had been tried (21.9 s behind 60,000). The poll now
// takes each endpoint's share, so it goes out at the first poll.
func TestFastFailingBacklogDelaysNobody(t *testing.T) {
	f := newFixture(t)
	a := f.shop(t, "")
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // connection refused: the fastest failure there is
	f.setIPN(t, a.Code, closed.URL+"/kadi/ipn")
	// More than the old poll's widest window (1,024), paid by 16 at once
	// so that the writer commits them in groups.
	const backlog = 1200
	start := time.Now().Add(-time.Hour)
	errs := make(chan error, backlog)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < backlog; i += 16 {
				_, err := f.tryPay(a, merchant.Test, start.Add(time.Duration(i)*time.Millisecond))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b := f.shop(t, "")
	rc := newReceiver(t, b, nil)
	f.setIPN(t, b.Code, rc.URL+"/kadi/ipn")
	ev := f.event(t, b, f.pay(t, b).Reference)

	stop := f.runWorker(t, fast(ipn.Config{Schedule: ipn.Schedule{time.Hour}}), nil)
	waitFor(t, "the other merchant's delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	evs, err := f.db.IPNEvents(t.Context(), ipn.Filter{MerchantCode: a.Code, Limit: 2 * backlog})
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, e := range evs {
		if e.Attempts > 0 {
			tried++
		}
	}
	if tried >= backlog/2 {
		t.Errorf("the other merchant's notification went out after %d of the %d in the backlog had been tried", tried, backlog)
	}
}

// Two nodes on PostgreSQL whose clocks are 7 s apart: with leases timed by
// each node's clock, the one ahead saw every lease the other held as run
// out and took it over, and each notification was sent twice. Leases now
// follow the database's clock.
func TestLeasesFollowTheDatabaseClock(t *testing.T) {
	base := os.Getenv("KADI_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("KADI_TEST_DATABASE_URL is not set: two nodes need PostgreSQL")
	}
	f, other := twoNodes(t, storetest.FreshSchema(t, base))
	s := f.shop(t, "")
	rc := newReceiver(t, s, func(int, http.ResponseWriter, *http.Request) bool {
		time.Sleep(300 * time.Millisecond) // long enough for the other node's polls
		return false
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	var evs []ipn.Event
	for range 5 {
		evs = append(evs, f.event(t, s, f.pay(t, s).Reference))
	}
	cfg := fast(ipn.Config{Lease: time.Second})
	stopA := run(t, &ipn.Worker{Queue: f.db, Config: cfg})
	// The node behind claims first; the node ahead comes while those
	// deliveries run.
	for _, ev := range evs {
		waitFor(t, "the first node's claims", func() bool {
			got, err := f.db.IPNEvent(t.Context(), ev.ID)
			return err == nil && (got.LeaseOwner != "" || got.Status == ipn.Delivered)
		})
	}
	stopB := run(t, &ipn.Worker{Queue: other, Config: cfg, Now: func() time.Time { return time.Now().Add(7 * time.Second) }})
	for _, ev := range evs {
		waitFor(t, "delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	}
	stopA()
	stopB()
	seen := map[string]int{}
	for _, r := range rc.requests() {
		seen[r.header.Get("webhook-id")]++
	}
	for _, ev := range evs {
		if seen[ev.ID] != 1 {
			t.Errorf("event %s sent %d times", ev.ID, seen[ev.ID])
		}
	}
}

// A worker that died holding a lease does not strand its event: once the
// lease runs out another worker delivers it.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	ev := f.event(t, s, f.pay(t, s).Reference)
	now := time.Now()
	leaseEnd := now.Add(300 * time.Millisecond)
	got, err := f.db.ClaimIPN(t.Context(), ipn.Claim{Owner: "crashed-node#1", Now: now, LeaseUntil: leaseEnd, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %d", err, len(got))
	}
	stop := f.runWorker(t, fast(ipn.Config{}), nil)
	waitFor(t, "delivery after the lease expired", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	atts := f.attempts(t, ev.ID)
	if len(atts) != 1 || atts[0].At.Before(leaseEnd.Truncate(time.Millisecond)) {
		t.Errorf("attempts %+v; want one, after the lease ended at %s", atts, leaseEnd)
	}
}

// A delivery that outlasts its lease keeps it by heartbeat: another node
// polling all along never takes the event, and the receiver hears it once.
// Without the heartbeat the second node would send it again after 1 s.
func TestHeartbeatKeepsASlowDelivery(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	release := make(chan struct{})
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		<-release
		return false
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	ev := f.event(t, s, f.pay(t, s).Reference)
	stop := f.runWorker(t, fast(ipn.Config{Lease: time.Second}), nil)
	waitFor(t, "the delivery to start", func() bool { return len(rc.requests()) == 1 })
	// A second node, by hand: it claims with the real clock, as a node
	// would, for three leases while the receiver holds the request.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		now := time.Now()
		got, err := f.db.ClaimIPN(t.Context(), ipn.Claim{Owner: "other-node#1", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
		if err != nil || len(got) != 0 {
			close(release)
			t.Fatalf("another node claimed the event under delivery: %v, %v", got, err)
		}
	}
	close(release)
	waitFor(t, "delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	if n := len(rc.requests()); n != 1 {
		t.Errorf("the receiver heard the event %d times", n)
	}
}

// Replay sends the same event again, with the same webhook-id.
func TestReplaySameWebhookID(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	stop := f.runWorker(t, fast(ipn.Config{}), nil)
	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	if _, err := f.db.ReplayIPN(t.Context(), ev.ID, time.Now(), "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "second delivery", func() bool { return len(f.attempts(t, ev.ID)) == 2 })
	waitFor(t, "delivered again", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	reqs := rc.requests()
	if len(reqs) != 2 || reqs[0].header.Get("webhook-id") != ev.ID || reqs[1].header.Get("webhook-id") != ev.ID {
		t.Fatalf("requests %d, ids differ or are not the event's", len(reqs))
	}
	if string(reqs[0].body) != string(reqs[1].body) || reqs[1].err != nil {
		t.Errorf("replay body differs or does not verify: %v", reqs[1].err)
	}
}

// A replay while an attempt is in flight: this worker claims the event
// again at once, and the first attempt's end must not stop renewing the
// new claim's lease. It did, the lease ran out mid-request, and the event
// was sent again and again without ever being recorded.
func TestReplayDuringAnAttemptIsSentOnceMore(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	started := make(chan struct{}, 100)
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		started <- struct{}{}
		time.Sleep(1500 * time.Millisecond) // longer than the lease, shorter than the timeout
		w.WriteHeader(http.StatusNoContent)
		return true
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	ev := f.event(t, s, f.pay(t, s).Reference)
	stop := f.runWorker(t, fast(ipn.Config{Lease: time.Second, Timeout: 3 * time.Second}), nil)
	<-started
	time.Sleep(1300 * time.Millisecond)
	if _, err := f.db.ReplayIPN(t.Context(), ev.ID, time.Now(), "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replay delivered", f.statusIs(t, ev.ID, ipn.Delivered))
	time.Sleep(2 * time.Second) // room for any further sends
	stop()
	if n := len(rc.requests()); n != 2 {
		t.Errorf("%d requests, want 2: the attempt in flight and the replay", n)
	}
}

// Test mode reaches loopback only when the operator allows it; the refusal
// is made on the connection, so the receiver never sees a request.
func TestPrivateTargetRefusedByDefault(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	cfg := fast(ipn.Config{})
	cfg.AllowPrivate = false
	stop := f.runWorker(t, cfg, nil)
	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "an attempt", func() bool { return len(f.attempts(t, ev.ID)) > 0 })
	stop()
	a := f.attempts(t, ev.ID)[0]
	if a.StatusCode != 0 || !strings.Contains(a.Error, ipn.ErrRefusedTarget.Error()) || !strings.Contains(a.Error, "loopback") {
		t.Errorf("attempt %+v, want refused as loopback", a)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver got %d requests", n)
	}
}

// Live mode never reaches a private address, even with --allow-private-ipn,
// and never sends over plain http.
func TestLiveNeverPrivate(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	stop := f.runWorker(t, fast(ipn.Config{Defer: 20 * time.Millisecond}), nil) // AllowPrivate is set
	for _, url := range []string{"https://localhost:" + port + "/ipn", "https://127.0.0.1:" + port + "/ipn", "http://shop.example/ipn"} {
		// Stored directly: the CLI would already refuse these.
		if _, err := f.db.SetIPN(t.Context(), s.Code, merchant.Live, merchant.IPNConfig{URL: url, Username: "u", Password: "p"}); err != nil {
			t.Fatal(err)
		}
		ev := f.event(t, s, f.payIn(t, s, merchant.Live, time.Now()).Reference)
		waitFor(t, "refusal of "+url, f.statusIs(t, ev.ID, ipn.Parked))
		if got, _ := f.db.IPNEvent(t.Context(), ev.ID); !strings.Contains(got.LastError, "not usable") {
			t.Errorf("%s: event parked because %q", url, got.LastError)
		}
	}
	stop()
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver got %d live-mode requests", n)
	}
}

// countingQueue counts the claims a worker makes.
type countingQueue struct {
	ipn.Queue
	claims atomic.Int32
}

func (q *countingQueue) ClaimIPN(ctx context.Context, c ipn.Claim) ([]ipn.Event, error) {
	q.claims.Add(1)
	return q.Queue.ClaimIPN(ctx, c)
}

// A worker claims a round ahead for an endpoint at its cap and starts the
// next event as a delivery ends, without a claim each time (its effect on
// throughput is in docs/performance.md); the cap on requests in flight
// holds; what is still queued when the worker stops is given back at
// once, not left to its lease.
func TestClaimsAheadPerEndpoint(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	var ids []string
	for range 40 {
		ids = append(ids, f.event(t, s, f.pay(t, s).Reference).ID)
	}
	q := &countingQueue{Queue: f.db}
	cfg := fast(ipn.Config{Workers: 8, PerEndpoint: 2})
	cfg.Poll = time.Hour // claims only when deliveries end, to count those
	w := &ipn.Worker{Queue: q, Config: cfg, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	for _, id := range ids {
		waitFor(t, "every delivery", f.statusIs(t, id, ipn.Delivered))
	}
	cancel()
	<-done
	if n := rc.maxIn.Load(); n > 2 {
		t.Errorf("%d requests in flight at once; the cap is 2", n)
	}
	// Two in flight and a share of four claimed at a time: a claim per
	// delivery (or per two) would mean no claiming ahead.
	if n := q.claims.Load(); n > int32(len(ids)/3) {
		t.Errorf("%d claims for %d events", n, len(ids))
	}

	// Stopping with events queued behind a hung endpoint gives them back.
	hold := make(chan struct{})
	defer close(hold)
	h := f.shop(t, "")
	hung := newReceiver(t, h, func(int, http.ResponseWriter, *http.Request) bool { <-hold; return false })
	f.setIPN(t, h.Code, hung.URL+"/kadi/ipn")
	ids = ids[:0]
	for range 4 {
		ids = append(ids, f.event(t, h, f.pay(t, h).Reference).ID)
	}
	w = &ipn.Worker{Queue: f.db, Config: fast(ipn.Config{Workers: 8, PerEndpoint: 2, Timeout: 2 * time.Second}), Log: slog.New(slog.DiscardHandler)}
	ctx, cancel = context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	waitFor(t, "the hung endpoint holding two requests", func() bool { return hung.inFlight.Load() == 2 })
	waitFor(t, "two more claimed and queued", func() bool {
		leased := 0
		for _, id := range ids {
			if ev, _ := f.db.IPNEvent(t.Context(), id); ev.LeaseOwner != "" {
				leased++
			}
		}
		return leased == 4
	})
	cancel()
	<-done
	leased := 0
	for _, id := range ids {
		if ev, _ := f.db.IPNEvent(t.Context(), id); ev.LeaseOwner != "" && ev.Attempts == 0 {
			leased++
		}
	}
	if leased != 0 {
		t.Errorf("%d never-started events still leased after the worker stopped", leased)
	}
}

// A notification goes out as soon as its payment is recorded, not at the
// next poll: the store tells the worker when it queues one, as kadi serve
// wires them. The poll here is an hour, and the first claim has already
// found the queue empty, so only the nudge can deliver in time.
func TestQueuedEventNudgesTheWorker(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	q, stop := f.runNudged(t, fast(ipn.Config{}))
	defer stop()
	waitFor(t, "the first claim", func() bool { return q.claims.Load() > 0 })

	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "the payment's notification", f.statusIs(t, ev.ID, ipn.Delivered))
	if _, err := f.db.ReplayIPN(t.Context(), ev.ID, time.Now(), "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replayed notification", func() bool { return len(f.attempts(t, ev.ID)) == 2 })
}

// A payment for a saturated endpoint (at its cap, its queue more than half
// full) does not make the worker claim: its events are taken as the queue drains, and behind a hung
// endpoint each claim would read the whole backlog again for nothing. A
// payment for another endpoint still goes out at once.
func TestNudgeForASaturatedEndpointClaimsNothing(t *testing.T) {
	f := newFixture(t)
	hold := make(chan struct{})
	h := f.shop(t, "")
	hung := newReceiver(t, h, func(int, http.ResponseWriter, *http.Request) bool { <-hold; return false })
	f.setIPN(t, h.Code, hung.URL+"/kadi/ipn")
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")

	q, stop := f.runNudged(t, fast(ipn.Config{Workers: 8, PerEndpoint: 2, Timeout: time.Minute}))
	defer func() { close(hold); stop() }()

	// Two in flight and five queued: no room for another share of four.
	leased := 0
	for leased < 7 {
		id := f.event(t, h, f.pay(t, h).Reference).ID
		waitFor(t, "the event claimed", func() bool { ev, _ := f.db.IPNEvent(t.Context(), id); return ev.LeaseOwner != "" })
		leased++
	}
	waitFor(t, "the hung endpoint's two requests", func() bool { return hung.inFlight.Load() == 2 })
	before := q.claims.Load()
	for range 10 {
		f.pay(t, h)
		time.Sleep(10 * time.Millisecond) // past the nudges' spacing: each could claim
	}
	ev := f.event(t, s, f.pay(t, s).Reference)
	waitFor(t, "the other endpoint's notification", f.statusIs(t, ev.ID, ipn.Delivered))
	if n := q.claims.Load() - before; n > 2 {
		t.Errorf("%d claims for ten payments to a saturated endpoint and one to another; want the other's only", n)
	}
}

// runNudged runs a worker as kadi serve wires it, nudged by the store when
// a payment queues an event, with an hour's poll so that only nudges and
// ended deliveries make it claim; it counts the claims.
func (f *fixture) runNudged(t *testing.T, cfg ipn.Config) (*countingQueue, func()) {
	q := &countingQueue{Queue: f.db}
	cfg.Poll = time.Hour
	w := &ipn.Worker{Queue: q, Config: cfg, Log: slog.New(slog.DiscardHandler)}
	f.db.OnIPNQueued(w.Nudge)
	t.Cleanup(func() { f.db.OnIPNQueued(func(ipn.Endpoint) {}) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	return q, func() { cancel(); <-done }
}

// skewedDatabase is a shared database whose clock runs ahead of this
// node's by ahead, counting how often it is read.
type skewedDatabase struct {
	ipn.Queue
	ahead atomic.Int64
	reads atomic.Int32
}

func (d *skewedDatabase) DatabaseNow(context.Context) (time.Time, bool, error) {
	d.reads.Add(1)
	return time.Now().Add(time.Duration(d.ahead.Load())), true, nil
}

// countingHandler counts the warnings logged.
type countingHandler struct {
	slog.Handler
	warnings atomic.Int32
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "clock is off") {
		h.warnings.Add(1)
	}
	return nil
}

// A worker reads the database's clock again while it runs (a node's time
// sync can step or drift after it started): its leases follow the new
// reading, and a node found more than a second off is warned about once,
// not at every reading.
func TestWorkerReadsTheDatabaseClockAgain(t *testing.T) {
	f := newFixture(t)
	db := &skewedDatabase{Queue: f.db}
	logs := &countingHandler{Handler: slog.DiscardHandler}
	w := &ipn.Worker{Queue: db, Config: fast(ipn.Config{}), Log: slog.New(logs)}
	w.ReadClockEvery(10 * time.Millisecond)
	run(t, w)
	readsAfter := func(n int32) int32 {
		target := db.reads.Load() + n
		waitFor(t, "readings of the database's clock", func() bool { return db.reads.Load() >= target })
		return db.reads.Load()
	}
	readsAfter(2)
	if got := time.Until(w.LeaseNow()); got.Abs() > 500*time.Millisecond || logs.warnings.Load() != 0 {
		t.Fatalf("in step: leases %v off, %d warnings", got, logs.warnings.Load())
	}

	db.ahead.Store(int64(5 * time.Second))
	readsAfter(5)
	if got := time.Until(w.LeaseNow()); got < 4500*time.Millisecond || got > 5500*time.Millisecond {
		t.Errorf("the database 5 s ahead: leases %v ahead", got)
	}
	if n := logs.warnings.Load(); n != 1 {
		t.Errorf("%d warnings for one clock step, want 1", n)
	}

	db.ahead.Store(0)
	readsAfter(2)
	if got := time.Until(w.LeaseNow()); got.Abs() > 500*time.Millisecond || logs.warnings.Load() != 1 {
		t.Errorf("back in step: leases %v off, %d warnings (want still 1)", got, logs.warnings.Load())
	}
}

// hangingQueue's first claim hangs until its context ends, as a query on
// a connection a database failover cut does.
type hangingQueue struct {
	ipn.Queue
	hung atomic.Bool
}

func (q *hangingQueue) ClaimIPN(ctx context.Context, c ipn.Claim) ([]ipn.Event, error) {
	if q.hung.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return q.Queue.ClaimIPN(ctx, c)
}

// A claim that hangs ends, and the next one delivers: it had stopped every
// claim of the node for as long as the socket took to die.
func TestHungClaimEnds(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	ev := f.event(t, s, f.pay(t, s).Reference)
	q := &hangingQueue{Queue: f.db}
	run(t, &ipn.Worker{Queue: q, Config: fast(ipn.Config{Lease: time.Second}), Log: slog.New(slog.DiscardHandler)})
	waitFor(t, "the delivery after a claim that hung", f.statusIs(t, ev.ID, ipn.Delivered))
	if !q.hung.Load() {
		t.Error("the first claim never came")
	}
}

// A 429 or 503 with a Retry-After pauses the whole endpoint on this node,
// not only the notification it answered: the merchant's other
// notifications were sent at once, each spending an attempt on the same
// refusal.
func TestRetryAfterPausesTheEndpoint(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	var mu sync.Mutex
	var at []time.Time
	rc := newReceiver(t, s, func(n int, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		return false
	})
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	var ids []string
	for range 6 {
		ids = append(ids, f.event(t, s, f.pay(t, s).Reference).ID)
	}
	f.runWorker(t, fast(ipn.Config{PerEndpoint: 1}), nil)
	for _, id := range ids {
		waitFor(t, "every delivery", f.statusIs(t, id, ipn.Delivered))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != len(ids)+1 {
		t.Errorf("%d requests for %d notifications, one refused: want %d", len(at), len(ids), len(ids)+1)
	}
	if len(at) > 1 {
		if gap := at[1].Sub(at[0]); gap < 1900*time.Millisecond {
			t.Errorf("the next request came %s after a 429 asking for 2 s", gap)
		}
	}
}

// The dashboard's test notification is dated as payments' notifications
// are, in the operator's zone: it was UTC, three hours off a real one in
// Nairobi, and a receiver's date parsing checked with it was checked wrong.
func TestTestNotificationDatedInTheOperatorsZone(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	at := time.Now().UTC() // the receiver checks the signature's time against its own clock
	w := &ipn.Worker{Queue: f.db, Config: fast(ipn.Config{}), Log: slog.New(slog.DiscardHandler), Location: f.loc, Now: func() time.Time { return at }}
	a, err := w.Test(t.Context(), s.Code, merchant.Test)
	if err != nil || a.StatusCode != http.StatusNoContent {
		t.Fatalf("test notification: %+v, %v", a, err)
	}
	got := rc.requests()
	want := `"date":"` + ipn.JavaTimestamp(at.In(f.loc)) + `"`
	if len(got) != 1 || !strings.Contains(string(got[0].body), want) {
		t.Fatalf("test notification %s, want %s (Nairobi time)", got[0].body, want)
	}
	// Its bill and order cannot be a real bill's or order's, which a
	// receiver keyed on them could credit.
	var p ipn.Payload
	if err := json.Unmarshal(got[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if bill.CouldBeReference(p.Transaction.BillNumber) || regexp.MustCompile(`^[A-Za-z0-9]{1,20}$`).MatchString(p.Transaction.AdditionalInfo) {
		t.Errorf("the test notification names bill %q and order %q, which real ones could be", p.Transaction.BillNumber, p.Transaction.AdditionalInfo)
	}
}

// downQueue's claims fail, as with the database down, until up.
type downQueue struct {
	ipn.Queue
	up     atomic.Bool
	claims atomic.Int32
}

func (q *downQueue) ClaimIPN(ctx context.Context, c ipn.Claim) ([]ipn.Event, error) {
	q.claims.Add(1)
	if !q.up.Load() {
		return nil, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return q.Queue.ClaimIPN(ctx, c)
}

// A database that is down fails every claim, every poll: said once, and
// once more when claims work again, not a line a poll.
func TestClaimFailuresAreNotSaidEveryPoll(t *testing.T) {
	f := newFixture(t)
	q := &downQueue{Queue: f.db}
	var out servertest.LogBuffer
	w := &ipn.Worker{Queue: q, Config: fast(ipn.Config{}), Log: slog.New(slog.NewTextHandler(&out, nil))}
	stop := run(t, w)
	waitFor(t, "a dozen failed claims", func() bool { return q.claims.Load() >= 12 })
	q.up.Store(true)
	n := q.claims.Load()
	waitFor(t, "a claim that works", func() bool { return q.claims.Load() > n+2 })
	stop()
	if got := strings.Count(out.String(), `msg="claim IPN events"`); got != 1 {
		t.Errorf("%d lines for the failed claims, want 1:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "claim IPN events: working again") {
		t.Errorf("no line when claims worked again:\n%s", out.String())
	}
}

// An outcome the database dropped the connection on is a warning, not an
// ERROR (no fault of the gateway's: the event is sent again once its
// lease runs out), and the attempt's line says it was not recorded: it
// said "delivered" of an event that would go out again.
func TestOutcomeUnrecordedInAnOutage(t *testing.T) {
	f := newFixture(t)
	a := f.shop(t, "")
	rc := newReceiver(t, a, nil)
	f.setIPN(t, a.Code, rc.URL+"/kadi/ipn")
	f.pay(t, a)
	logs := &messages{}
	stop := run(t, &ipn.Worker{Queue: unrecordable{f.db}, Config: fast(ipn.Config{}), Log: slog.New(logs)})
	waitFor(t, "the attempt's line", func() bool { return logs.has("INFO IPN attempt recorded=false") })
	stop()
	if logs.has("ERROR ") {
		t.Errorf("an outcome unrecorded in an outage logged an error:\n%s", logs)
	}
	if !logs.has("WARN record IPN attempt: database out of reach") {
		t.Errorf("no warning that the outcome went unrecorded:\n%s", logs)
	}
}

// unrecordable is the queue with its outcomes' writes cut, as a
// PostgreSQL connection reset (SQLSTATE 08006) cuts them.
type unrecordable struct{ ipn.Queue }

func (unrecordable) RecordIPN(context.Context, ipn.Result) error {
	return fmt.Errorf("record IPN attempt: %w", outagetest.SQLStateError("08006"))
}
