package client

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// Values of [Callback.OrderStatus]. The misspelling of StatusSuccessful is
// the gateway's documented wire value and must stay as it is.
const (
	StatusSuccessful = "Transaction Successfull"
	StatusFailed     = "Transaction Failed"
)

// maxCallbackBody is far above the seven short fields a real callback holds;
// it only stops a forged post from filling memory.
const maxCallbackBody = 64 << 10

// Callback is the payment result the customer's browser posts to the
// callback URL.
//
// It is NOT authenticated: it travels through the browser, so anyone can
// forge one. Use it only to find the order, then call [Client.Verify] with
// BillReference and check Paid and the amount before giving value.
type Callback struct {
	OrderAmount    string
	OrderReference string
	OrderStatus    string // StatusSuccessful or StatusFailed
	Message        string // why a payment failed, in words for the customer
	// DateTime is the gateway's "yyyy-MM-ddZ" text, such as
	// "2026-11-21+0300", kept as text since it holds no time of day.
	DateTime      string
	BillReference string
	// TransactionRef is the card network's reference; empty on failure.
	TransactionRef string
}

// Successful reports whether the callback claims success. The claim is the
// browser's, not the gateway's: it decides what page to show the customer,
// never whether to deliver. See [Client.Verify].
func (cb Callback) Successful() bool {
	return cb.OrderStatus == StatusSuccessful
}

// ParseCallback reads a callback from the request to the callback URL. It
// accepts only a form-encoded POST of at most 64 KiB with orderStatus and
// billReference present, and reads only the body, never the URL's query.
// Every error wraps [ErrInvalidCallback]; answer it with 400.
func ParseCallback(r *http.Request) (Callback, error) {
	if r.Method != http.MethodPost {
		return Callback{}, fmt.Errorf("%w: method %s, want POST", ErrInvalidCallback, r.Method)
	}
	form, err := callbackForm(r)
	if err != nil {
		return Callback{}, err
	}
	cb := Callback{
		OrderAmount:    form.Get("orderAmount"),
		OrderReference: form.Get("orderReference"),
		OrderStatus:    form.Get("orderStatus"),
		Message:        form.Get("message"),
		DateTime:       form.Get("dateTime"),
		BillReference:  form.Get("billReference"),
		TransactionRef: form.Get("transactionRef"),
	}
	for _, f := range []struct{ name, value string }{
		{"orderStatus", cb.OrderStatus}, {"billReference", cb.BillReference},
	} {
		if f.value == "" {
			return Callback{}, fmt.Errorf("%w: %s is missing", ErrInvalidCallback, f.name)
		}
	}
	return cb, nil
}

func callbackForm(r *http.Request) (url.Values, error) {
	// Middleware (a logger, a framework) may have parsed the body already,
	// leaving nothing to read; its result is the same body.
	if r.PostForm != nil {
		return r.PostForm, nil
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/x-www-form-urlencoded" {
		return nil, fmt.Errorf("%w: Content-Type %q, want application/x-www-form-urlencoded",
			ErrInvalidCallback, r.Header.Get("Content-Type"))
	}
	if r.Body == nil {
		return nil, fmt.Errorf("%w: no body", ErrInvalidCallback)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCallbackBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading body: %v", ErrInvalidCallback, err)
	}
	if len(body) > maxCallbackBody {
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrInvalidCallback, maxCallbackBody)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCallback, err)
	}
	return form, nil
}
