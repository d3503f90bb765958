// Package ipn builds, signs and delivers instant payment notifications.
// Events are written to an outbox in the same transaction as the charge
// they announce; the worker delivers them at least once.
package ipn

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// Status is where an event is in delivery.
type Status string

const (
	Pending Status = "pending"
	// Parked events have no endpoint to go to: the merchant's IPN URL is
	// not set, not usable, or disabled after a 410. They cost nothing
	// while they wait, and saving the IPN configuration sends those up to
	// ParkedResendWindow old; older ones go only by replay.
	Parked    Status = "parked"
	Delivered Status = "delivered"
	Failed    Status = "failed" // retries exhausted; can be replayed
)

// ParkedResendWindow is how old a parked event may be and still be sent
// when its merchant saves an IPN configuration: the default schedule's
// span, so a receiver that is set up within it hears what a receiver that
// was down for as long would have heard. Months of old notifications
// arriving the day a merchant first sets a URL would surprise it more.
const ParkedResendWindow = 72 * time.Hour

// ResentNote tells whoever saved an IPN configuration what the save sent.
func ResentNote(n int) string {
	if n == 1 {
		return fmt.Sprintf("1 parked notification (from the last %d days) is being sent there now.", parkedDays)
	}
	return fmt.Sprintf("%d parked notifications (from the last %d days) are being sent there now.", n, parkedDays)
}

const parkedDays = int(ParkedResendWindow / (24 * time.Hour))

// Statuses lists every status, in the order of an event's life.
var Statuses = []Status{Pending, Parked, Delivered, Failed}

// ErrBadStatus is ParseStatus's error, worded for whoever typed it.
var ErrBadStatus = errors.New("status must be pending, parked, delivered or failed")

// ParseStatus reads a status filter; empty means any.
func ParseStatus(s string) (Status, error) {
	if s == "" || slices.Contains(Statuses, Status(s)) {
		return Status(s), nil
	}
	return "", ErrBadStatus
}

// Event is one notification to deliver. ID is the Standard Webhooks
// webhook-id: the same on every attempt and replay of this event.
type Event struct {
	ID            string
	MerchantCode  string
	Mode          merchant.Mode
	PaymentID     string
	Payload       []byte
	Status        Status
	Attempts      int
	NextAttemptAt time.Time
	CreatedAt     time.Time
	DeliveredAt   time.Time
	// Attempts counts requests in the current round; a replay starts a
	// new round at zero. Replays counts the replays.
	Replays int
	// LastError says why the event is still pending or failed, for
	// operators; empty once delivered.
	LastError string
	// LeaseOwner and LeaseUntil are the claim of the worker delivering it.
	LeaseOwner string
	LeaseUntil time.Time
}

// Attempt is one request to the merchant's receiver, kept for operators
// and merchants to see why a notification did or did not arrive.
type Attempt struct {
	EventID    string
	Seq        int // 1, 2, … over the event's whole life, replays included
	At         time.Time
	URL        string
	StatusCode int // 0 when no HTTP answer came
	Latency    time.Duration
	Error      string // empty on success
	// Response is the start of the receiver's body, at most
	// MaxResponseExcerpt bytes, as valid UTF-8.
	Response string
}

// MaxResponseExcerpt bounds the receiver's body kept per attempt.
const MaxResponseExcerpt = 1024

// Payload is spec 2.7. Amounts are json.Number so they go out as exact
// decimal JSON numbers ("1500.00"), never binary-float approximations.
type Payload struct {
	CallbackType string             `json:"callbackType"`
	Customer     PayloadCustomer    `json:"customer"`
	Transaction  PayloadTransaction `json:"transaction"`
	Bank         PayloadBank        `json:"bank"`
}

type PayloadCustomer struct {
	Name         string  `json:"name"`
	MobileNumber string  `json:"mobileNumber"`
	Reference    *string `json:"reference"`
}

type PayloadTransaction struct {
	Date           string      `json:"date"`
	Reference      string      `json:"reference"`
	PaymentMode    string      `json:"paymentMode"`
	Amount         json.Number `json:"amount"`
	BillNumber     string      `json:"billNumber"`
	OrderAmount    json.Number `json:"orderAmount"`
	ServiceCharge  json.Number `json:"serviceCharge"`
	ServedBy       string      `json:"servedBy"`
	AdditionalInfo string      `json:"additionalInfo"`
	Status         string      `json:"status"`
	Remarks        string      `json:"remarks"`
}

type PayloadBank struct {
	Reference       string `json:"reference"`
	TransactionType string `json:"transactionType"`
	Account         string `json:"account"`
}

// JavaTimestamp formats t as the spec's "yyyy-MM-dd HH:mm:ss.S". Receivers
// read the fraction two ways: as Java's S (milliseconds, unpadded, so ".5" is
// 5 ms) or as java.sql.Timestamp prints it (".5" is half a second). Whole
// seconds with ".0" mean the same to both.
func JavaTimestamp(t time.Time) string {
	return t.Truncate(time.Second).Format("2006-01-02 15:04:05") + ".0"
}
