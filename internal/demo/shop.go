// Package demo is a small coffee shop that sells through Kadi, built only on
// the public client package: what `kadi demo` serves next to the gateway so
// a newcomer can click through a test checkout.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Product is something the shop sells.
type Product struct {
	ID, Name, Description, Price string
}

var catalogue = []Product{
	{"kenya-aa", "Kenya AA, 250 g", "Bright and winey, from Nyeri", "1500.00"},
	{"ruiru-11", "Ruiru 11 espresso, 500 g", "Chocolate and blackcurrant", "2450.00"},
	{"sampler", "Tasting sampler", "Three 100 g bags", "990.00"},
}

// Shop is the demo merchant's web site.
type Shop struct {
	Client      *client.Client
	Credentials merchant.Credentials
	ShopURL     string // where the shop itself is reached, for the callback URL
	Log         *slog.Logger
	// IPN verifies notifications; nil leaves the shop without an IPN URL.
	IPN *client.IPNConfig

	mu       sync.Mutex
	received map[string]client.Notification // by bill number
}

// IPNPath is where the shop receives notifications.
const IPNPath = "/ipn"

// Handler serves the shop.
func (s *Shop) Handler() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.home)
	mux.HandleFunc("POST /checkout", s.checkout)
	mux.HandleFunc("POST /callback", s.callback)
	mux.HandleFunc("GET /orders/{bill}", s.order)
	if s.IPN != nil {
		h, err := client.NewIPNHandler(*s.IPN, s.notified)
		if err != nil {
			return nil, err
		}
		mux.Handle("POST "+IPNPath, h)
	}
	return mux, nil
}

// notified records a verified IPN; a repeat delivery overwrites itself.
func (s *Shop) notified(_ context.Context, n client.Notification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.received == nil {
		s.received = map[string]client.Notification{}
	}
	s.received[n.Transaction.BillNumber] = n
	s.Log.Info("demo shop: IPN received", "bill", n.Transaction.BillNumber, "amount", n.Transaction.Amount)
	return nil
}

// order shows what the shop knows of a bill, including its IPN.
func (s *Shop) order(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n, ok := s.received[r.PathValue("bill")]
	s.mu.Unlock()
	render(w, http.StatusOK, "order", map[string]any{"Bill": r.PathValue("bill"), "IPN": n, "HasIPN": ok})
}

func (s *Shop) home(w http.ResponseWriter, r *http.Request) {
	render(w, http.StatusOK, "home", map[string]any{"Products": catalogue, "Cards": sim.TestCards})
}

func (s *Shop) checkout(w http.ResponseWriter, r *http.Request) {
	var p *Product
	for i := range catalogue {
		if catalogue[i].ID == r.FormValue("product") {
			p = &catalogue[i]
		}
	}
	if p == nil {
		http.Error(w, "unknown product", http.StatusBadRequest)
		return
	}
	order := "DEMO" + secret.RandomUpperAlnum(8)
	bill, err := s.Client.CreateBill(r.Context(), client.BillRequest{
		Customer: client.Customer{Name: "Demo Customer"},
		Order: client.Order{BillerCode: s.Credentials.BillerCode, Reference: order, Amount: p.Price, Currency: "KES",
			Description: p.Name, Outlet: s.Credentials.OutletCode},
	})
	if err != nil {
		s.Log.Error("create bill", "err", err)
		http.Error(w, "could not create the bill: "+err.Error(), http.StatusBadGateway)
		return
	}
	token, err := s.Client.PaymentToken(r.Context()) // pay-only: this page goes to the shopper
	if err != nil {
		http.Error(w, "could not get a token: "+err.Error(), http.StatusBadGateway)
		return
	}
	var form bytes.Buffer
	err = s.Client.RenderPaymentForm(&form, client.PaymentForm{
		Token: token, OutletCode: s.Credentials.OutletCode, MerchantCode: s.Credentials.MerchantCode,
		Amount: bill.Amount, OrderReference: order, BillReference: bill.Reference,
		ProductType: p.ID, ProductDescription: p.Description,
		CustomerFirstName: "Demo", CustomerLastName: "Customer", Country: "Kenya",
		MobileNumber: "+254 712345678", EmailAddress: "customer@example.com", City: "Nairobi",
		CallbackURL: strings.TrimSuffix(s.ShopURL, "/") + "/callback",
	}, client.FormOptions{SubmitLabel: "Pay KES " + bill.Amount + " by card"})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, http.StatusOK, "checkout", map[string]any{"Product": p, "Bill": bill, "Form": template.HTML(form.String()), "Cards": sim.TestCards})
}

// callback is where the customer's browser comes back. The post is not
// authenticated, so the shop verifies from its backend before trusting it.
func (s *Shop) callback(w http.ResponseWriter, r *http.Request) {
	cb, err := client.ParseCallback(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v, err := s.Client.Verify(r.Context(), cb.BillReference)
	if err != nil {
		http.Error(w, "could not verify the payment: "+err.Error(), http.StatusBadGateway)
		return
	}
	render(w, http.StatusOK, "result", map[string]any{"Callback": cb, "Verified": v})
}

func render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, fmt.Sprint("render: ", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

var pages = template.Must(template.New("").Parse(`
{{define "top"}}<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Kadi demo shop</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:720px;margin:32px auto;padding:0 16px;color:#222}
.card{border:1px solid #ddd;border-radius:10px;padding:16px;margin:12px 0}button{padding:10px 16px;font-size:16px;border:0;border-radius:6px;background:#6b3e26;color:#fff;cursor:pointer}
.ok{color:#0a6e4f}.bad{color:#b3261e}table{border-collapse:collapse}td{padding:4px 12px 4px 0}code{background:#f4f4f4;padding:1px 4px}</style>
</head><body><h1>☕ Kadi demo shop</h1>{{end}}
{{define "cards"}}<details><summary>Test cards</summary><p>Any future expiry, any CVV (4 digits for Amex).</p><table>
{{range .Cards}}<tr><td><code>{{.Grouped}}</code></td><td>{{.Result}}</td></tr>{{end}}</table></details>{{end}}
{{define "home"}}{{template "top"}}<p>A pretend shop that takes card payments through Kadi in test mode. No real money moves.</p>
{{range .Products}}<form class="card" method="post" action="/checkout"><strong>{{.Name}}</strong> · KES {{.Price}}<br><small>{{.Description}}</small><br>
<input type="hidden" name="product" value="{{.ID}}"><button type="submit">Buy</button></form>{{end}}{{template "cards" .}}</body></html>{{end}}
{{define "checkout"}}{{template "top"}}<div class="card"><p>Order <strong>{{.Bill.OrderRef}}</strong>: {{.Product.Name}}</p>
<p>Kadi bill <code>{{.Bill.Reference}}</code>, amount KES {{.Bill.Amount}}.</p>{{.Form}}</div>
<p><small>The button posts the hidden form to Kadi's hosted page, which asks for the card: this shop never sees card data.</small></p>{{template "cards" .}}</body></html>{{end}}
{{define "result"}}{{template "top"}}<div class="card">
{{if .Verified.Paid}}<h2 class="ok" id="result">Payment confirmed</h2>{{else}}<h2 class="bad" id="result">Payment not completed</h2>{{end}}
<p>{{.Callback.Message}}</p><table>
<tr><td>Order</td><td>{{.Callback.OrderReference}}</td></tr><tr><td>Amount</td><td>KES {{.Callback.OrderAmount}}</td></tr>
<tr><td>Callback said</td><td>{{.Callback.OrderStatus}}</td></tr><tr><td>Verified from the backend</td><td>{{if .Verified.Paid}}paid{{else}}not paid{{end}}</td></tr>
<tr><td>Transaction</td><td>{{.Verified.TransactionID}}</td></tr></table>
{{if .Verified.Paid}}<p>The signed IPN for this payment arrives in the background: <a href="/orders/{{.Callback.BillReference}}">see it</a>.</p>{{end}}</div>
<p><a href="/">Back to the shop</a></p></body></html>{{end}}
{{define "order"}}{{template "top"}}<div class="card"><h2>Bill {{.Bill}}</h2>
{{if .HasIPN}}<p class="ok" id="ipn">IPN received and verified (Basic credentials and Standard Webhooks signature).</p><table>
<tr><td>Webhook id</td><td>{{.IPN.ID}}</td></tr><tr><td>Amount</td><td>{{.IPN.Transaction.Amount}}</td></tr>
<tr><td>Transaction</td><td>{{.IPN.Transaction.Reference}}</td></tr><tr><td>Status</td><td>{{.IPN.Transaction.Status}}</td></tr>
<tr><td>Date</td><td>{{.IPN.Transaction.Date}}</td></tr></table>
{{else}}<p id="ipn">No IPN yet: it is usually here within a second. Reload the page.</p>{{end}}</div>
<p><a href="/">Back to the shop</a></p></body></html>{{end}}
`))
