package sim_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

var (
	networkRef   = regexp.MustCompile(`^[A-Z0-9]{8,}$`)
	approvalCode = regexp.MustCompile(`^[0-9]{6}$`)
)

func request(t *testing.T, id, number string) payment.ChargeRequest {
	t.Helper()
	pan, err := card.ParsePAN(number)
	if err != nil {
		t.Fatalf("%s: %v", number, err)
	}
	exp, err := card.ParseExpiry("12", strconv.Itoa(time.Now().Year()+2), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	amount, err := money.Parse("1500.00", "KES")
	if err != nil {
		t.Fatal(err)
	}
	cvv := "737"
	if pan.Brand() == card.Amex {
		cvv = "7373"
	}
	return payment.ChargeRequest{PaymentID: id, Amount: amount, PAN: pan, Expiry: exp, CVV: cvv, Holder: "Jane Wanjiru"}
}

// The test-card table of docs/hosted-form.md.
func TestTestCards(t *testing.T) {
	cases := []struct {
		number  string
		outcome payment.Outcome
		code    string
		message string // a fragment
	}{
		{"4242424242424242", payment.Approved, "", ""},
		{"4111111111111111", payment.Approved, "", ""},
		{"5555555555554444", payment.Approved, "", ""},
		{"2223003122003222", payment.Approved, "", ""},
		{"378282246310005", payment.Approved, "", ""},
		{"6011111111111117", payment.Approved, "", ""}, // any other Luhn-valid card of a known brand
		{"4000000000000002", payment.Declined, "generic_decline", "declined"},
		{"4000000000009995", payment.Declined, "insufficient_funds", "insufficient funds"},
		{"4000000000000069", payment.Declined, "expired_card", "expired"},
		{"4000000000000127", payment.Declined, "incorrect_cvc", "security code"},
		{"4000000000000119", payment.AcquirerError, "processing_error", "nothing was charged"},
		{"4000000000003220", payment.ChallengeNeeded, "", ""},
	}
	a := sim.New([]byte("test key"), nil)
	for i, tc := range cases {
		t.Run(tc.number, func(t *testing.T) {
			res, err := a.Charge(context.Background(), request(t, "pay_"+strconv.Itoa(i), tc.number))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome || res.DeclineCode != tc.code || !strings.Contains(res.Message, tc.message) {
				t.Errorf("got %s %q %q, want %s %q containing %q", res.Outcome, res.DeclineCode, res.Message, tc.outcome, tc.code, tc.message)
			}
			switch tc.outcome {
			case payment.Approved:
				if !networkRef.MatchString(res.NetworkRef) || !approvalCode.MatchString(res.ApprovalCode) {
					t.Errorf("approval without references: %+v", res)
				}
			case payment.ChallengeNeeded:
				if res.ChallengeRef == "" || res.NetworkRef != "" {
					t.Errorf("challenge: %+v", res)
				}
			default:
				if res.NetworkRef != "" || res.ApprovalCode != "" || res.Message == "" {
					t.Errorf("failure carries references or no message: %+v", res)
				}
			}
		})
	}
}

// An acquirer must be idempotent on the payment id: asking twice never
// charges twice, whatever the second request carries.
func TestChargeIsIdempotentPerPaymentID(t *testing.T) {
	a := sim.New([]byte("test key"), nil)
	ctx := context.Background()
	first, err := a.Charge(ctx, request(t, "pay_same", "4242424242424242"))
	if err != nil {
		t.Fatal(err)
	}
	for _, number := range []string{"4242424242424242", "4000000000000002", "5555555555554444"} {
		again, err := a.Charge(ctx, request(t, "pay_same", number))
		if err != nil || again != first {
			t.Errorf("second charge of pay_same with %s: %+v, first %+v", number[:6], again, first)
		}
	}
	other, err := a.Charge(ctx, request(t, "pay_other", "4242424242424242"))
	if err != nil || other.NetworkRef == first.NetworkRef {
		t.Errorf("another payment reused network reference %s", first.NetworkRef)
	}
	if got, err := a.Lookup(ctx, "pay_same"); err != nil || got != first {
		t.Errorf("Lookup: %+v, %v; want %+v", got, err, first)
	}
	if got, err := a.Lookup(ctx, "pay_never"); err != nil || got.Outcome != payment.NotFoundAtBank {
		t.Errorf("Lookup of an unknown payment: %+v, %v", got, err)
	}
}

func TestChallenge(t *testing.T) {
	ctx := context.Background()
	key := []byte("test key")
	start := func(t *testing.T, a *sim.Acquirer, id string) string {
		t.Helper()
		res, err := a.Charge(ctx, request(t, id, "4000000000003220"))
		if err != nil || res.Outcome != payment.ChallengeNeeded {
			t.Fatalf("charge: %+v, %v", res, err)
		}
		if got, _ := a.Lookup(ctx, id); got.Outcome != payment.NotFoundAtBank {
			t.Errorf("Lookup of a pending challenge: %s, want not found (nothing charged yet)", got.Outcome)
		}
		return res.ChallengeRef
	}

	t.Run("right code approves", func(t *testing.T) {
		a := sim.New(key, nil)
		ref := start(t, a, "pay_3ds_ok")
		res, err := a.CompleteChallenge(ctx, ref, sim.ChallengeCode)
		if err != nil || res.Outcome != payment.Approved || res.NetworkRef == "" {
			t.Fatalf("%+v, %v", res, err)
		}
		if got, _ := a.Lookup(ctx, "pay_3ds_ok"); got != res {
			t.Errorf("Lookup after approval: %+v", got)
		}
		if got, _ := a.Charge(ctx, request(t, "pay_3ds_ok", "4000000000003220")); got != res {
			t.Errorf("charging the approved payment again: %+v", got)
		}
	})

	// A second answer to a settled challenge must not rewrite what the bank
	// recorded: Reconcile trusts Lookup to say whether money moved.
	t.Run("answer after approval changes nothing", func(t *testing.T) {
		a := sim.New(key, nil)
		ref := start(t, a, "pay_3ds_twice")
		first, err := a.CompleteChallenge(ctx, ref, sim.ChallengeCode)
		if err != nil || first.Outcome != payment.Approved {
			t.Fatalf("%+v, %v", first, err)
		}
		for _, code := range []string{"000000", sim.ChallengeCode} {
			again, err := a.CompleteChallenge(ctx, ref, code)
			if err != nil || again != first {
				t.Errorf("answering %q again: %+v, first %+v", code, again, first)
			}
		}
		if got, _ := a.Lookup(ctx, "pay_3ds_twice"); got != first {
			t.Errorf("Lookup after a second answer: %+v, want the approval %+v", got, first)
		}
	})

	t.Run("wrong code declines", func(t *testing.T) {
		a := sim.New(key, nil)
		ref := start(t, a, "pay_3ds_bad")
		for _, code := range []string{"654321", "", "1234567", "12345"} {
			res, err := a.CompleteChallenge(ctx, ref, code)
			if err != nil || res.Outcome != payment.Declined || res.Message != payment.MsgChallengeFail {
				t.Errorf("code %q: %+v, %v", code, res, err)
			}
		}
	})

	t.Run("survives a restart with the same key", func(t *testing.T) {
		ref := start(t, sim.New(key, nil), "pay_3ds_restart")
		res, err := sim.New(key, nil).CompleteChallenge(ctx, ref, sim.ChallengeCode)
		if err != nil || res.Outcome != payment.Approved {
			t.Errorf("%+v, %v", res, err)
		}
	})

	t.Run("forged reference declines", func(t *testing.T) {
		a := sim.New(key, nil)
		ref := start(t, a, "pay_3ds_forged")
		id, mac, _ := strings.Cut(ref, ".")
		forged := []string{
			"pay_3ds_other." + mac,                   // another payment's MAC
			id + "." + strings.Repeat("0", len(mac)), // a made-up MAC
			id,                                       // no MAC
			"",
		}
		// A reference made under another key is forged too.
		if other := start(t, sim.New([]byte("other key"), nil), "pay_3ds_forged"); other != ref {
			forged = append(forged, other)
		} else {
			t.Error("challenge references do not depend on the key")
		}
		for _, f := range forged {
			res, err := a.CompleteChallenge(ctx, f, sim.ChallengeCode)
			if err != nil || res.Outcome != payment.Declined {
				t.Errorf("forged %q: %+v, %v", f, res, err)
			}
		}
		if got, _ := a.Lookup(ctx, "pay_3ds_other"); got.Outcome != payment.NotFoundAtBank {
			t.Errorf("a forged reference charged another payment: %+v", got)
		}
	})
}

func TestCanceledContext(t *testing.T) {
	a := sim.New([]byte("test key"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Charge(ctx, request(t, "pay_cancel", "4242424242424242")); err == nil {
		t.Error("Charge with a canceled context succeeded")
	}
	if got, _ := a.Lookup(context.Background(), "pay_cancel"); got.Outcome != payment.NotFoundAtBank {
		t.Errorf("a canceled charge was recorded: %+v", got)
	}
}
