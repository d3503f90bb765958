package client

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors of IPN verification. [IPNHandler] answers ErrIPNUnauthorized with
// 401 and ErrInvalidIPN with 400; the gateway then retries, so a mistake in
// the receiver's configuration delays notifications but loses none.
var (
	// ErrIPNUnauthorized: the Basic credentials are missing or wrong.
	ErrIPNUnauthorized = errors.New("kadi: IPN credentials refused")
	// ErrInvalidIPN: the signature, timestamp or body is not acceptable.
	ErrInvalidIPN = errors.New("kadi: invalid IPN")
)

// DefaultIPNTolerance is how far an IPN's webhook-timestamp may be from the
// receiver's clock. It bounds how long a captured request can be replayed.
const DefaultIPNTolerance = 5 * time.Minute

// maxIPNBody is far above a real notification (under 1 KiB).
const maxIPNBody = 64 << 10

// Notification is an instant payment notification: the gateway's message
// that a payment succeeded. Unlike a [Callback] it is authenticated, so a
// verified Notification may be acted on. The same notification can arrive
// more than once (the gateway retries until it gets a 2xx): make handling
// idempotent, keyed by ID or by Transaction.BillNumber.
type Notification struct {
	// ID is the webhook-id header: one value per notification, the same
	// on every retry and replay of it.
	ID string `json:"-"`
	// SentAt is the webhook-timestamp of this delivery attempt.
	SentAt time.Time `json:"-"`

	CallbackType string                  `json:"callbackType"` // "IPN"
	Customer     NotificationCustomer    `json:"customer"`
	Transaction  NotificationTransaction `json:"transaction"`
	Bank         NotificationBank        `json:"bank"`
}

// NotificationCustomer is who paid.
type NotificationCustomer struct {
	Name         string `json:"name"`
	MobileNumber string `json:"mobileNumber"`
	// Reference is nil when the gateway sent null.
	Reference *string `json:"reference"`
}

// NotificationTransaction is the payment. Amounts are decimal text exactly
// as sent ("1500.00"), never binary floating point: compare them with the
// order's amount as decimals.
type NotificationTransaction struct {
	// Date is the gateway's "yyyy-MM-dd HH:mm:ss.S" text in its time zone.
	Date           string `json:"date"`
	Reference      string `json:"reference"`   // the card network's reference
	PaymentMode    string `json:"paymentMode"` // "CARD"
	Amount         string `json:"amount"`
	BillNumber     string `json:"billNumber"` // the bill reference
	OrderAmount    string `json:"orderAmount"`
	ServiceCharge  string `json:"serviceCharge"`
	ServedBy       string `json:"servedBy"`       // the outlet code
	AdditionalInfo string `json:"additionalInfo"` // the merchant's order reference
	Status         string `json:"status"`         // "SUCCESS"
	Remarks        string `json:"remarks"`
}

// NotificationBank is the settlement side.
type NotificationBank struct {
	Reference       string `json:"reference"`       // the gateway's payment id
	TransactionType string `json:"transactionType"` // "C", a credit
	Account         string `json:"account"`         // the merchant's settlement account
}

// Successful reports whether the notification announces a successful
// payment, which is all the gateway currently sends.
func (n Notification) Successful() bool { return n.Transaction.Status == "SUCCESS" }

// IPNConfig is what a receiver needs to verify notifications for one mode
// (test or live): the secrets are per mode.
type IPNConfig struct {
	// Secret is the mode's notification secret ("whsec_…"), printed at
	// onboarding (kadi merchant create) and shown on the dashboard's
	// Developers page; POST /token also answers it as notification-secret.
	Secret string
	// Username and Password are the Basic credentials configured for the
	// IPN in the dashboard. Leave both empty to rely on the signature
	// alone.
	Username, Password string
	// Tolerance overrides DefaultIPNTolerance.
	Tolerance time.Duration
	// Now tells the time; nil means time.Now.
	Now func() time.Time
}

// IPNHandler is an http.Handler for the IPN URL. It checks the Basic
// credentials and the Standard Webhooks signature, then calls the merchant's
// function and answers 2xx only when that returned nil; any other answer
// makes the gateway deliver again later.
type IPNHandler struct {
	key                []byte
	username, password string
	tolerance          time.Duration
	now                func() time.Time
	handle             func(context.Context, Notification) error
}

// NewIPNHandler returns a handler calling handle with every verified
// notification. handle should record the payment durably before returning
// nil; an error it returns is answered with 500 and the notification comes
// again.
func NewIPNHandler(cfg IPNConfig, handle func(ctx context.Context, n Notification) error) (*IPNHandler, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(cfg.Secret, "whsec_"))
	if err != nil || len(key) == 0 || !strings.HasPrefix(cfg.Secret, "whsec_") {
		return nil, fmt.Errorf("%w: IPN secret must be the whsec_… notification secret", ErrInvalidConfig)
	}
	if strings.Contains(cfg.Username, ":") {
		return nil, fmt.Errorf("%w: an IPN username cannot contain ':' (HTTP Basic authentication splits at the first one)", ErrInvalidConfig)
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, fmt.Errorf("%w: set both IPN username and password, or neither", ErrInvalidConfig)
	}
	if handle == nil {
		return nil, fmt.Errorf("%w: no IPN handler function", ErrInvalidConfig)
	}
	h := &IPNHandler{key: key, username: cfg.Username, password: cfg.Password, tolerance: cfg.Tolerance, now: cfg.Now, handle: handle}
	if h.tolerance <= 0 {
		h.tolerance = DefaultIPNTolerance
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

func (h *IPNHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxIPNBody+1))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	if len(body) > maxIPNBody {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	n, err := h.Verify(r.Header, body)
	switch {
	case errors.Is(err, ErrIPNUnauthorized):
		w.Header().Set("WWW-Authenticate", `Basic realm="kadi-ipn"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := h.handle(r.Context(), n); err != nil {
		http.Error(w, "not processed", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Verify checks a notification's headers and body without serving HTTP,
// for receivers built on other frameworks: pass the request headers and the
// raw body exactly as received.
func (h *IPNHandler) Verify(header http.Header, body []byte) (Notification, error) {
	if h.username != "" && !h.basicOK(header.Get("Authorization")) {
		return Notification{}, ErrIPNUnauthorized
	}
	id := header.Get("webhook-id")
	tsText := header.Get("webhook-timestamp")
	sigs := header.Get("webhook-signature")
	if id == "" || tsText == "" || sigs == "" {
		return Notification{}, fmt.Errorf("%w: webhook-id, webhook-timestamp and webhook-signature are required", ErrInvalidIPN)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return Notification{}, fmt.Errorf("%w: webhook-timestamp is not unix seconds", ErrInvalidIPN)
	}
	sentAt := time.Unix(ts, 0)
	if d := h.now().Sub(sentAt); d > h.tolerance || d < -h.tolerance {
		return Notification{}, fmt.Errorf("%w: webhook-timestamp is %s from this server's clock (tolerance %s)", ErrInvalidIPN, d.Round(time.Second), h.tolerance)
	}
	if !h.signatureOK(id, tsText, body, sigs) {
		return Notification{}, fmt.Errorf("%w: signature does not match", ErrInvalidIPN)
	}
	n, err := decodeNotification(body)
	if err != nil {
		return Notification{}, fmt.Errorf("%w: %v", ErrInvalidIPN, err)
	}
	n.ID, n.SentAt = id, sentAt
	return n, nil
}

// basicOK compares both credentials in constant time, always both, so the
// answer's timing tells nothing about which was wrong or how much matched.
func (h *IPNHandler) basicOK(authz string) bool {
	user, pass, ok := (&http.Request{Header: http.Header{"Authorization": {authz}}}).BasicAuth()
	u := subtle.ConstantTimeCompare(digest(user), digest(h.username))
	p := subtle.ConstantTimeCompare(digest(pass), digest(h.password))
	return ok && u&p == 1
}

// digest makes both sides of a comparison the same length, which
// ConstantTimeCompare needs to be constant time.
func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// signatureOK accepts any of the space-separated "v1,…" signatures, as the
// Standard Webhooks specification allows during secret rotation.
func (h *IPNHandler) signatureOK(id, ts string, body []byte, header string) bool {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	ok := false
	for _, s := range strings.Fields(header) {
		version, sig, found := strings.Cut(s, ",")
		if !found || version != "v1" {
			continue
		}
		// Strict: a signature with other bits in its padding decodes to
		// the same bytes, and is not the one the gateway sent.
		got, err := base64.StdEncoding.Strict().DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}

// decodeNotification reads the payload, keeping every amount as the exact
// decimal text sent, whether it came as a JSON number, a string or null.
func decodeNotification(body []byte) (Notification, error) {
	var wire struct {
		Notification
		Transaction struct {
			NotificationTransaction
			Amount        decimalText `json:"amount"`
			OrderAmount   decimalText `json:"orderAmount"`
			ServiceCharge decimalText `json:"serviceCharge"`
		} `json:"transaction"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&wire); err != nil {
		return Notification{}, fmt.Errorf("body is not the IPN JSON: %v", err)
	}
	n := wire.Notification
	n.Transaction = wire.Transaction.NotificationTransaction
	n.Transaction.Amount = string(wire.Transaction.Amount)
	n.Transaction.OrderAmount = string(wire.Transaction.OrderAmount)
	n.Transaction.ServiceCharge = string(wire.Transaction.ServiceCharge)
	return n, nil
}

// decimalText takes a JSON number or string as its literal text; null is "".
type decimalText string

func (d *decimalText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*d = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = decimalText(s)
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("amount %s is not a number", b)
		}
		*d = decimalText(n)
	}
	return nil
}
