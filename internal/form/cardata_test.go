package form_test

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// docs/hosted-form.md: PAN and CVV never reach disk or logs in clear.
func TestNoCardDataAtRestOrInLogs(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Careful Shop")
	tok := g.Token(c, merchant.Test)

	// Every test card, solid and spaced as printed, plus numbers the form
	// refuses, which must not be written anywhere either.
	numbers := []string{visa, visa2, mastercard, mastercard2, amex, cardDeclined, cardInsufficient, cardExpired,
		cardIncorrectCVV, cardAcquirerError, card3DS, badLuhn}
	spaced := func(n string) string {
		if len(n) == 15 {
			return n[:4] + " " + n[4:10] + " " + n[10:]
		}
		return n[:4] + " " + n[4:8] + " " + n[8:12] + " " + n[12:]
	}
	for i, n := range numbers {
		for j, typed := range []string{n, spaced(n)} {
			code := cvv
			if n == amex {
				code = amexCVV
			}
			b := g.CreateBill(c, tok, "PAN"+strconv.Itoa(i)+"X"+strconv.Itoa(j), "10")
			rec := g.CardPay(servertest.Card{Number: typed, CVV: code}.Apply(servertest.FormFields(c, tok, b)))
			if n == card3DS {
				page := servertest.ParsePage(rec.Body.String())
				f, ok := page.FormTo("/cardPay/3ds")
				if !ok {
					t.Fatalf("no challenge page for the 3-D Secure card: %d", rec.Code)
				}
				rec = g.Serve(servertest.ChallengeRequest(f.Values()["checkout"], "123456"))
			}
			if rec.Code != http.StatusOK {
				t.Fatalf("card %s: %d", n[:6], rec.Code)
			}
		}
	}
	// A typo on our own card-entry page is re-rendered, not charged.
	b := g.CreateBill(c, tok, "PANENTRY", "10")
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))
	if rec := g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: badLuhn, CVV: cvv})); rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("typo on the entry page: %d", rec.Code)
	}

	// A card number typed into a name field, whole or split between the
	// two, is refused before any charge and not shown again: it would be
	// the cardholder on the payment and the merchant's dashboard.
	// Digits of another script count: a shopper's Arabic or Japanese
	// keyboard types them, and they were kept as the cardholder.
	inScript := func(n string, zero rune) string {
		return strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return zero + r - '0'
			}
			return r
		}, n)
	}
	for _, names := range [][2]string{{visa2, "Wanjiru"}, {"Jane", spaced(mastercard2)}, {visa2[:6], visa2[6:]},
		{inScript(visa2, '\u0660'), "Wanjiru"}, {"Jane", inScript(spaced(visa2), '\uff10')}, {inScript(visa2, '\u06f0'), ""}} {
		rec := g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: visa, CVV: cvv, FirstName: names[0], LastName: names[1]}))
		body := rec.Body.String()
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "must be the name on the card, not its number") {
			t.Errorf("a card number as the name %q: %d", names, rec.Code)
		}
		for _, n := range names {
			if n != "Jane" && n != "Wanjiru" && n != "" && strings.Contains(body, `value="`+n+`"`) {
				t.Errorf("the card page shows %q, typed as a name, again", n)
			}
		}
	}
	// Both names refused: they come back empty, not as the shop's
	// customer, whom a second press of Pay would send as the cardholder.
	rec := g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: visa, CVV: cvv, FirstName: "Jane 123456", LastName: "Doe " + visa}))
	if f, ok := servertest.ParsePage(rec.Body.String()).FormTo("/cardPay"); !ok {
		t.Errorf("no card form after refused names: %d", rec.Code)
	} else {
		for _, name := range []string{"cardFirstName", "cardLastName"} {
			if in, ok := f.Input(name); !ok || in.Attrs["value"] != "" {
				t.Errorf("refused %s came back as %q, want it empty", name, in.Attrs["value"])
			}
		}
	}
	b2 := g.CreateBill(c, tok, "PANNAME", "10")
	cb := g.Callback(g.CardPay(servertest.Card{Number: visa, CVV: cvv, FirstName: visa2, LastName: "Wanjiru"}.Apply(servertest.FormFields(c, tok, b2))))
	if cb["orderStatus"] != "Transaction Failed" || !strings.Contains(cb["message"], "cardFirstName must be the name on the card") {
		t.Errorf("a merchant form with a card number as the name: %v", cb)
	}
	// A shop's form whose own fields hold a card number (a shopper who typed
	// it into the shop's address box) fails before our card page, whose
	// session would keep them; one whose holder names do shows the page
	// without them.
	b3 := g.CreateBill(c, tok, "PANFIELDS", "10")
	v := servertest.FormFields(c, tok, b3)
	// As an outside review typed them: doubled spaces, spaced dashes,
	// commas, colons, no-break spaces, full-width digits, the card run on
	// into its expiry and code.
	shopFields := map[string]string{"address": visa2, "city": spaced(mastercard2), "productDescription": "gift " + amex,
		"customerFirstName": spaced(visa), "postalcodeZip": mastercard, "ipAddress": cardDeclined,
		"customerLastName": strings.Join([]string{visa[:4], visa[4:8], visa[8:12], visa[12:]}, "  "),
		"country":          strings.Join([]string{visa2[:4], visa2[4:8], visa2[8:12], visa2[12:]}, " - "),
		"productType":      strings.Join([]string{mastercard[:4], mastercard[4:8], mastercard[8:12], mastercard[12:]}, ","),
		"serviceDate":      strings.Join([]string{visa[:4], visa[4:8], visa[8:12], visa[12:]}, ":"),
		"emailAddress":     visa2 + "1230123"}
	for k, n := range shopFields {
		v.Set(k, n)
	}
	rec = g.CardPay(v)
	if strings.Contains(rec.Body.String(), `name="cardNumber"`) {
		t.Error("the card page was shown for a shop form holding card numbers in its own fields")
	}
	cb = g.Callback(rec)
	for k := range shopFields {
		if cb["orderStatus"] != "Transaction Failed" || !strings.Contains(cb["message"], k+" must not hold a card number") {
			t.Errorf("a card number in the shop's %s: %v", k, cb)
		}
	}
	b4 := g.CreateBill(c, tok, "PANPREFILL", "10")
	v = servertest.FormFields(c, tok, b4)
	v.Set("cardFirstName", spaced(visa2))
	v.Set("cardLastName", mastercard2)
	page := g.CardPay(v).Body.String()
	if !strings.Contains(page, `name="cardNumber"`) {
		t.Fatal("no card page for a shop form with card numbers as the holder's names")
	}
	if strings.Contains(page, spaced(visa2)) || strings.Contains(page, mastercard2) {
		t.Error("the card page shows a card number the shop sent as a holder name")
	}

	for _, ref := range []string{b.Reference, b2.Reference, b3.Reference, b4.Reference} {
		if n := g.CountPayments(ref, ""); n != 0 {
			t.Errorf("bill %s: %d payments after names that were card numbers", ref, n)
		}
	}

	var needles []string
	for _, n := range numbers {
		needles = append(needles, n, spaced(n))
	}
	for _, code := range []string{cvv, amexCVV} {
		needles = append(needles, "cardSecurity="+code, `"cardSecurity":"`+code, `cvv":"`+code, "CVV:"+code)
	}

	scan := func(where string, data []byte) {
		for _, n := range needles {
			if strings.Contains(string(data), n) {
				t.Errorf("%s contains %q", where, n)
			}
		}
	}
	scanDir := func() int {
		files := 0
		err := filepath.WalkDir(g.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			scan(path, data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	// While open, the WAL holds the newest pages.
	if n := scanDir(); n < 2 {
		t.Errorf("scanned %d files in %s; expected the database and its WAL", n, g.Dir)
	}
	scan("the log", []byte(g.Logs.String()))
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	scanDir()
}
