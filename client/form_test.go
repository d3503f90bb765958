package client_test

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kadipay/kadi/client"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func sampleForm() client.PaymentForm {
	return client.PaymentForm{
		Token:              "tok-1",
		OutletCode:         "OUTLET01",
		MerchantCode:       "1000000001",
		Amount:             "1500.00",
		OrderReference:     "ORDER1001",
		BillReference:      "KD0000000001",
		ProductType:        "tickets",
		ProductDescription: "Two tickets, Saturday show",
		ServiceDate:        "2026-11-21",
		CustomerFirstName:  "Wanjiku",
		CustomerLastName:   "Kamau",
		Country:            "KE",
		MobileNumber:       "+254 712345678",
		EmailAddress:       "wanjiku@example.com",
		PostalcodeZip:      "00100",
		Address:            "Kenyatta Avenue 1",
		City:               "Nairobi",
		IPAddress:          "203.0.113.7",
		CallbackURL:        "https://shop.example/kadi/callback",
	}
}

func formClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{
		BaseURL: "https://api.kadi.example", PaymentFormURL: "https://pay.kadi.example/",
		APIKey: testAPIKey, Username: testUsername, Password: testPassword,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRenderPaymentFormGolden(t *testing.T) {
	withCard := sampleForm()
	withCard.Card = &client.CardFields{
		FirstName: "Wanjiku", LastName: "Kamau", Number: "4012888888881881", // a public Visa test number
		Security: "123", ExpiryYear: "2030", ExpiryMonth: "12",
	}
	tests := []struct {
		golden string
		form   client.PaymentForm
		opts   client.FormOptions
	}{
		{"form_gateway_collects_card.html", sampleForm(), client.FormOptions{}},
		{"form_with_card.html", withCard, client.FormOptions{SubmitLabel: "Pay KES 1,500.00", ID: "checkout", AutoSubmit: true}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := formClient(t).RenderPaymentForm(&buf, tt.form, tt.opts); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got := buf.String(); got != string(want) {
				t.Errorf("form differs from %s:\n%s", path, got)
			}
		})
	}
}

func TestRenderPaymentFormEscapes(t *testing.T) {
	const hostile = `"><script>alert(1)</script>`
	tests := []struct {
		name string
		edit func(*client.PaymentForm, *client.FormOptions)
	}{
		{"attribute value", func(f *client.PaymentForm, _ *client.FormOptions) { f.ProductDescription = hostile }},
		{"customer name", func(f *client.PaymentForm, _ *client.FormOptions) { f.CustomerFirstName = hostile }},
		{"card field", func(f *client.PaymentForm, _ *client.FormOptions) {
			f.Card = &client.CardFields{FirstName: hostile}
		}},
		{"button label", func(_ *client.PaymentForm, o *client.FormOptions) { o.SubmitLabel = hostile }},
		{"form id", func(_ *client.PaymentForm, o *client.FormOptions) { o.ID = hostile }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, opts := sampleForm(), client.FormOptions{}
			tt.edit(&f, &opts)
			var buf bytes.Buffer
			if err := formClient(t).RenderPaymentForm(&buf, f, opts); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if strings.Contains(out, "<script") || strings.Contains(out, `"><`) {
				t.Errorf("value not escaped:\n%s", out)
			}
			if !strings.Contains(out, "&lt;script&gt;") {
				t.Errorf("escaped value missing:\n%s", out)
			}
		})
	}
}

func TestPaymentFormValues(t *testing.T) {
	base := []string{
		"address", "amount", "billReference", "callbackUrl", "city", "country", "customerFirstName",
		"customerLastName", "emailAddress", "ipAddress", "merchantCode", "mobileNumber", "orderReference",
		"outletCode", "postalcodeZip", "productDescription", "productType", "serviceDate", "token",
	}
	card := []string{"cardExpiryMonth", "cardExpiryYear", "cardFirstName", "cardLastName", "cardNumber", "cardSecurity"}
	withCard := sampleForm()
	withCard.Card = &client.CardFields{Number: "4242424242424242", Security: "123"} // test card

	tests := []struct {
		name string
		form client.PaymentForm
		want []string
	}{
		// Without a card, the card inputs are absent, not empty: absence is
		// what asks the gateway to collect the card itself.
		{"gateway collects card", sampleForm(), base},
		{"with card", withCard, append(slices.Clone(base), card...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.form.Values()
			got := slices.Sorted(maps.Keys(v))
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("fields = %v\nwant %v", got, want)
			}
			if v.Get("billReference") != "KD0000000001" || v.Get("callbackUrl") != "https://shop.example/kadi/callback" {
				t.Errorf("values not carried over: %v", v)
			}
		})
	}
}

func TestPaymentFormAction(t *testing.T) {
	tests := []struct {
		base, form, want string
	}{
		{"https://api.kadi.example", "", "https://api.kadi.example/cardPay"},
		{"https://api.kadi.example/", "", "https://api.kadi.example/cardPay"},
		{"https://api.kadi.example", "https://pay.kadi.example/", "https://pay.kadi.example/cardPay"},
		{"https://gw.example/kadi/", "", "https://gw.example/kadi/cardPay"},
	}
	for _, tt := range tests {
		c, err := client.New(client.Config{
			BaseURL: tt.base, PaymentFormURL: tt.form, APIKey: "k", Username: "u", Password: "p",
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PaymentFormAction(); got != tt.want {
			t.Errorf("base %q, form %q: action %q, want %q", tt.base, tt.form, got, tt.want)
		}
	}
}

func TestCardFieldsAreMaskedInLogs(t *testing.T) {
	card := client.CardFields{
		FirstName: "Wanjiku", LastName: "Kamau", Number: "4111111111111111", // test card
		Security: "987", ExpiryYear: "2030", ExpiryMonth: "12",
	}
	// The time attribute is dropped: its nanoseconds can spell "987".
	noTime := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	jsonLog := func(v any) string {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, noTime)).Info("form", "card", v)
		return buf.String()
	}
	textLog := func(v any) string {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, noTime)).Info("form", "card", v)
		return buf.String()
	}
	tests := []struct {
		name string
		out  string
	}{
		{"%v", fmt.Sprintf("%v", card)},
		{"%+v", fmt.Sprintf("%+v", card)},
		{"%#v", fmt.Sprintf("%#v", card)},
		{"%+v of a pointer", fmt.Sprintf("%+v", &card)},
		{"slog JSON", jsonLog(card)},
		{"slog text", textLog(card)},
		{"slog JSON of a pointer", jsonLog(&card)},
	}
	for _, tt := range tests {
		if strings.Contains(tt.out, card.Number) || strings.Contains(tt.out, card.Security) {
			t.Errorf("%s leaks the card: %s", tt.name, tt.out)
		}
		if !strings.Contains(tt.out, "card ending 1111") {
			t.Errorf("%s: %s, want the masked card", tt.name, tt.out)
		}
	}
}
