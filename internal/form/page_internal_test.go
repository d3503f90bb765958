package form

import "testing"

// What an error page takes from the page the shopper came from, of each
// kind: the shop's name, its home page and the mode; never in place of a
// shop the request already knew, and nothing from a page that knows no
// shop (its home page, or its name, missing).
func TestLead(t *testing.T) {
	const home = "https://shop.example/"
	for _, tt := range []struct {
		name     string
		p        page
		before   pageError
		shop, to string
		test     bool
	}{
		{"checkout page", page{Kind: kindCheckout, Merchant: "Duka", Shop: home, Test: true}, pageError{}, "Duka", home, true},
		{"result page: its callback's home", page{Kind: kindResult, Merchant: "Duka", Action: "https://shop.example/kadi/return?x=1"}, pageError{}, "Duka", home, false},
		{"error page: its own way back", page{Kind: kindError, Error: &pageError{Shop: "Duka", ShopURL: home, Test: true}}, pageError{}, "Duka", home, true},
		{"the request's shop stays", page{Kind: kindCheckout, Merchant: "Other", Shop: "https://other.example/"}, pageError{Shop: "Duka", ShopURL: home}, "Duka", home, false},
		{"a test the request knew stays one", page{Kind: kindCheckout}, pageError{Test: true}, "", "", true},
		{"no home page", page{Kind: kindCheckout, Merchant: "Duka", Test: true}, pageError{}, "", "", true},
		{"no name", page{Kind: kindCheckout, Shop: home}, pageError{}, "", "", false},
		{"a result page whose action is not a URL", page{Kind: kindResult, Merchant: "Duka", Action: "%zz"}, pageError{}, "", "", false},
	} {
		pe := tt.before
		tt.p.lead(&pe)
		if pe.Shop != tt.shop || pe.ShopURL != tt.to || pe.Test != tt.test {
			t.Errorf("%s: shop %q at %q, test %t; want %q at %q, %t", tt.name, pe.Shop, pe.ShopURL, pe.Test, tt.shop, tt.to, tt.test)
		}
	}
}
