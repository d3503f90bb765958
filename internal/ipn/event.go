// Package ipn builds, signs and delivers instant payment notifications.
// Events are written to an outbox in the same transaction as the charge
// they announce; the worker delivers them at least once.
package ipn

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// Status is where an event is in delivery.
type Status string

const (
	Pending   Status = "pending"
	Delivered Status = "delivered"
	Failed    Status = "failed" // retries exhausted; can be replayed
)

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
}

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

// JavaTimestamp formats t as the spec's "yyyy-MM-dd HH:mm:ss.S": Java's S is
// the millisecond count, unpadded.
func JavaTimestamp(t time.Time) string {
	return fmt.Sprintf("%s.%d", t.Format("2006-01-02 15:04:05"), t.Nanosecond()/int(time.Millisecond))
}
