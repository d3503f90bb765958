package e2e

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kadipay/kadi/client"
)

// panTestCards is every card of docs/hosted-form.md, one more Luhn-valid Visa that
// the simulator approves as "any other card", and one that fails Luhn.
var panTestCards = []string{
	"4242424242424242", "4111111111111111", "5555555555554444", "2223003122003222",
	"378282246310005", "4000000000000002", "4000000000009995", "4000000000000069",
	"4000000000000127", "4000000000000119", "4000000000003220", "4012888888881881",
	"4242424242424241",
}

// TestNoPANAtRest pays with every test card, through the merchant's own
// form and through the gateway's card-entry page, then scans every file of
// the data dir and the server's log for the card numbers (docs/hosted-form.md: PAN
// and CVV never reach disk or logs in clear).
func TestNoPANAtRest(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "PAN Shop") })
	s := newShopper(t, g, m)

	var billRefs []string
	for i, number := range panTestCards {
		b := s.createBill(t, "PAN"+string(rune('A'+i)), "15.00")
		billRefs = append(billRefs, b.Reference)
		p := s.submit(t, s.paymentForm(t, b, testCard(number)))
		if p.hasForm("/cardPay/3ds") {
			p = s.answerChallenge(t, p, "123456")
		}
		cb := s.callback.follow(t, p)
		t.Logf("%s…: %s (%s)", number[:6], cb.OrderStatus, cb.Message)
	}

	// The card-entry page: a typo first (the page is shown again), then the
	// real card.
	entryCard := "5555555555554444"
	typo := "5555555555554445"
	b := s.createBill(t, "PANENTRY", "15.00")
	billRefs = append(billRefs, b.Reference)
	entry := s.submit(t, s.paymentForm(t, b, nil))
	form := entry.Form(t, "/cardPay")
	if _, ok := form.Inputs["cardNumber"]; !ok || entry.Status != http.StatusOK {
		t.Fatalf("want the card-entry page, got HTTP %d:\n%s", entry.Status, entry.Body)
	}
	fill := func(number string) url.Values {
		v := url.Values{}
		for k, vs := range form.Inputs {
			v[k] = append([]string(nil), vs...)
		}
		c := testCard(number)
		v.Set("cardFirstName", c.FirstName)
		v.Set("cardLastName", c.LastName)
		v.Set("cardNumber", c.Number)
		v.Set("cardSecurity", c.Security)
		v.Set("cardExpiryMonth", c.ExpiryMonth)
		v.Set("cardExpiryYear", c.ExpiryYear)
		return v
	}
	again := postPage(t, g.BaseURL+"/cardPay", fill(typo))
	if again.Status != http.StatusUnprocessableEntity || !again.hasForm("/cardPay") {
		t.Fatalf("typo on the card-entry page: HTTP %d, want 422 and the page again:\n%s", again.Status, again.Body)
	}
	if strings.Contains(again.Body, typo) {
		t.Error("the card-entry page echoes the card number it refused")
	}
	if cb := s.callback.follow(t, postPage(t, g.BaseURL+"/cardPay", fill(entryCard))); !cb.Successful() {
		t.Fatalf("payment through the card-entry page: %+v", cb)
	}

	// Card numbers where no card number belongs: a log line must mask them
	// all the same.
	pathProbe := "4111111111111111"
	resp, err := http.Get(g.BaseURL + "/lookup/" + pathProbe + "?card=" + pathProbe)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	idProbe := "4917610000000000" // Luhn-valid Visa, used nowhere else
	req, _ := http.NewRequest(http.MethodGet, g.BaseURL+"/healthz", nil)
	req.Header.Set("X-Request-Id", idProbe)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// A shop that puts the card in the customer's name or the
	// description: the bill is refused, and the number is stored nowhere.
	billProbe := "4556737586899855" // Luhn-valid Visa, used nowhere else
	for _, field := range []string{"customer.name", "order.description"} {
		req := s.billRequest("PANFIELD", "15.00")
		if field == "customer.name" {
			req.Customer.Name = billProbe
		} else {
			req.Order.Description = "card " + billProbe
		}
		_, err := s.c.CreateBill(context.Background(), req)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || len(apiErr.Fields) != 1 || apiErr.Fields[0].Field != field || apiErr.Fields[0].Code != "card_number" {
			t.Errorf("a card number in %s: %v", field, err)
		}
	}

	cards := append(append([]string(nil), panTestCards...), typo, billProbe)
	scan := func(t *testing.T, when string) {
		t.Helper()
		files := append(filesUnder(t, g.DataDir), g.LogFiles()...)
		for _, hit := range findCardNumbers(t, files, cards) {
			t.Errorf("%s: card number %s… in clear in %s", when, hit.number[:6], hit.file)
		}
		// The scan reads what the gateway stored: every bill reference is
		// there, or the scan looked at the wrong bytes.
		data := readAll(t, filesUnder(t, g.DataDir))
		for _, ref := range billRefs {
			if !bytes.Contains(data, []byte(ref)) {
				t.Errorf("%s: bill %s not found in the data dir: the scan does not see the stored data", when, ref)
			}
		}
		if !bytes.Contains(g.Logs(), []byte(`"path":"/cardPay"`)) {
			t.Errorf("%s: the server log has no /cardPay request: the scan does not see the log", when)
		}
		if !bytes.Contains(g.Logs(), []byte("/lookup/411111******1111")) {
			t.Errorf("%s: the card number in a request path is not in the log masked as 411111******1111", when)
		}
	}

	t.Run("while serving", func(t *testing.T) { scan(t, "while serving") })
	g.Stop()
	t.Run("after graceful stop", func(t *testing.T) { scan(t, "after stop") })

	t.Run("request id header", func(t *testing.T) {
		hits := findCardNumbers(t, g.LogFiles(), []string{idProbe})
		for _, hit := range hits {
			t.Errorf("a card number sent as X-Request-Id is in clear in %s", hit.file)
		}
	})
}

type cardHit struct{ number, file string }

// findCardNumbers reports which card numbers appear in which files, solid
// ("4242424242424242") or in groups of four ("4242 4242 4242 4242").
func findCardNumbers(t testing.TB, files, numbers []string) []cardHit {
	t.Helper()
	var hits []cardHit
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("scan %s: %v", f, err)
		}
		for _, n := range numbers {
			if bytes.Contains(b, []byte(n)) || bytes.Contains(b, []byte(grouped(n, " "))) || bytes.Contains(b, []byte(grouped(n, "-"))) {
				hits = append(hits, cardHit{n, f})
			}
		}
	}
	return hits
}

func grouped(number, sep string) string {
	var parts []string
	for len(number) > 4 {
		parts = append(parts, number[:4])
		number = number[4:]
	}
	return strings.Join(append(parts, number), sep)
}

func filesUnder(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	if len(out) == 0 {
		t.Fatalf("no files under %s", dir)
	}
	return out
}

func readAll(t testing.TB, files []string) []byte {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}
