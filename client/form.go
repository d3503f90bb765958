package client

import (
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/url"
)

// PaymentForm is what the customer's browser posts to the hosted card page.
// Token comes from [Client.PaymentToken] (never [Client.Token]: the form is
// in the customer's browser); Amount and BillReference from the [Bill];
// OrderReference is the order's reference. The gateway checks that all of
// them agree with the bill and refuses the form otherwise.
type PaymentForm struct {
	Token              string
	OutletCode         string
	MerchantCode       string
	Amount             string
	OrderReference     string
	BillReference      string
	ProductType        string
	ProductDescription string // at most 200 characters
	ServiceDate        string
	CustomerFirstName  string
	CustomerLastName   string
	Country            string
	// MobileNumber is in E.123 international form: "+254 712345678".
	MobileNumber  string
	EmailAddress  string
	PostalcodeZip string
	Address       string
	City          string
	IPAddress     string
	// CallbackURL is where the browser returns with the result: absolute,
	// with no query and no fragment (the gateway refuses one that has them),
	// https in live mode.
	CallbackURL string

	// Card is nil in the recommended integration: the gateway then shows
	// its own card-entry page and card data never touches the merchant's
	// pages, servers or logs. Filling it in puts the merchant's whole site
	// in PCI DSS scope.
	Card *CardFields
}

// CardFields are card data typed by the customer on the merchant's own page.
// Prefer leaving [PaymentForm.Card] nil.
type CardFields struct {
	FirstName, LastName string
	Number, Security    string
	ExpiryYear          string
	ExpiryMonth         string
}

// String masks the card, so that logging a CardFields by accident (%v, %+v,
// %#v, or log/slog through LogValue) writes no card number and no security
// code.
func (c CardFields) String() string {
	last4 := "????"
	if len(c.Number) >= 4 {
		last4 = c.Number[len(c.Number)-4:]
	}
	return fmt.Sprintf("card ending %s, expiring %s/%s", last4, c.ExpiryMonth, c.ExpiryYear)
}

// GoString masks %#v the way String masks %v.
func (c CardFields) GoString() string { return c.String() }

// LogValue masks the card for log/slog, whose JSON handler would otherwise
// write every field.
func (c CardFields) LogValue() slog.Value { return slog.StringValue(c.String()) }

// formField is one hidden input. Order matters for a stable, reviewable
// form, which a map such as url.Values cannot give.
type formField struct{ Name, Value string }

// fields lists the inputs in the order the service spec documents them,
// leaving out the card inputs entirely when there is no card: an empty
// cardNumber would be invalid card data, an absent one asks the gateway to
// collect it.
func (f PaymentForm) fields() []formField {
	out := []formField{
		{"token", f.Token},
		{"outletCode", f.OutletCode},
		{"merchantCode", f.MerchantCode},
		{"amount", f.Amount},
		{"orderReference", f.OrderReference},
		{"billReference", f.BillReference},
		{"productType", f.ProductType},
		{"productDescription", f.ProductDescription},
		{"serviceDate", f.ServiceDate},
	}
	if c := f.Card; c != nil {
		out = append(out,
			formField{"cardFirstName", c.FirstName},
			formField{"cardLastName", c.LastName},
			formField{"cardNumber", c.Number},
			formField{"cardSecurity", c.Security},
			formField{"cardExpiryYear", c.ExpiryYear},
			formField{"cardExpiryMonth", c.ExpiryMonth},
		)
	}
	return append(out,
		formField{"customerFirstName", f.CustomerFirstName},
		formField{"customerLastName", f.CustomerLastName},
		formField{"country", f.Country},
		formField{"mobileNumber", f.MobileNumber},
		formField{"emailAddress", f.EmailAddress},
		formField{"postalcodeZip", f.PostalcodeZip},
		formField{"address", f.Address},
		formField{"city", f.City},
		formField{"ipAddress", f.IPAddress},
		formField{"callbackUrl", f.CallbackURL},
	)
}

// Values returns the form's fields under the names the gateway expects, for
// merchants who build the form with their own templates.
func (f PaymentForm) Values() url.Values {
	v := url.Values{}
	for _, field := range f.fields() {
		v.Set(field.Name, field.Value)
	}
	return v
}

// PaymentFormAction is the URL the payment form posts to.
func (c *Client) PaymentFormAction() string {
	return c.formBase + "/cardPay"
}

// DefaultFormID is the id of the form [Client.RenderPaymentForm] writes when
// [FormOptions.ID] is empty.
const DefaultFormID = "kadi-payment-form"

// FormOptions adjusts the form [Client.RenderPaymentForm] writes.
type FormOptions struct {
	// SubmitLabel is the button's text; empty means "Pay".
	SubmitLabel string
	// ID is the form element's id; empty means DefaultFormID.
	ID string
	// AutoSubmit marks the form with a data-kadi-autosubmit attribute. No
	// script is written: an inline script would break under a strict
	// Content-Security-Policy. Submit it from a script the page loads from
	// its own origin, such as:
	//
	//	document.querySelector("form[data-kadi-autosubmit]")?.submit();
	//
	// The button stays, for browsers without JavaScript.
	AutoSubmit bool
}

// paymentFormTemplate is html/template, so every value is escaped for the
// attribute it lands in, and an action URL with a javascript: scheme would
// be neutralised.
var paymentFormTemplate = template.Must(template.New("form").Parse(
	`<form id="{{.ID}}" method="post" action="{{.Action}}"{{if .AutoSubmit}} data-kadi-autosubmit{{end}}>
{{range .Fields}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<button type="submit">{{.Label}}</button>
</form>
`))

// RenderPaymentForm writes an HTML form of hidden inputs that posts f to the
// hosted card page, with a submit button. It writes only the form element,
// for the merchant's own page around it. Serve that page with
// Cache-Control: no-store, since the form carries a bearer token.
func (c *Client) RenderPaymentForm(w io.Writer, f PaymentForm, opts FormOptions) error {
	data := struct {
		ID, Action, Label string
		AutoSubmit        bool
		Fields            []formField
	}{
		ID:         firstNonEmpty(opts.ID, DefaultFormID),
		Action:     c.PaymentFormAction(),
		Label:      firstNonEmpty(opts.SubmitLabel, "Pay"),
		AutoSubmit: opts.AutoSubmit,
		Fields:     f.fields(),
	}
	return paymentFormTemplate.Execute(w, data)
}
