package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const queryPath = "/payment/v2/query"

// Verification is the gateway's own record of a bill's payment: the only
// answer to trust before giving value.
type Verification struct {
	OrderRef      string
	TransactionID string
	// Amount is what was paid, as decimal text; compare it with the order.
	Amount string
	// Paid is true only when a charge for the bill succeeded.
	Paid bool
	// Date is when the answer last changed: the successful charge's time,
	// else the last attempt's, else when the bill was created; zero if the
	// gateway gave none.
	Date      time.Time
	Narration string
}

type verifyResponse struct {
	OrderRef      string      `json:"orderRef"`
	TransactionID string      `json:"transactionId"`
	Amount        looseString `json:"amount"`
	Status        looseString `json:"status"`
	Date          string      `json:"date"`
	Narration     string      `json:"narration"`
}

// dateLayouts are the ISO 8601 forms with an offset seen in the wild: RFC
// 3339, and Java's default rendering with a colon-less offset.
var dateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700"}

// Verify asks the gateway whether a bill was paid. The reference may be the
// bill reference or the merchant's order reference. An unknown reference is
// an [*APIError] matching [ErrNotFound]; an unpaid bill is not an error but a
// Verification with Paid false.
//
// Call Verify before giving value for a [Callback]: the callback comes
// through the customer's browser and proves nothing.
func (c *Client) Verify(ctx context.Context, billOrOrderReference string) (*Verification, error) {
	if strings.TrimSpace(billOrOrderReference) == "" {
		return nil, errors.New("kadi: Verify needs a bill or order reference")
	}
	q := url.Values{"billReference": {billOrOrderReference}}
	resp, err := c.doBearer(ctx, http.MethodGet, queryPath, q, nil)
	if err != nil {
		return nil, err
	}
	if resp.status/100 != 2 {
		return nil, c.apiError(resp)
	}
	var v verifyResponse
	if err := json.Unmarshal(resp.body, &v); err != nil {
		return nil, malformed(resp, "verification response: "+err.Error())
	}
	out := &Verification{
		OrderRef:      v.OrderRef,
		TransactionID: v.TransactionID,
		Amount:        string(v.Amount),
		// Strings too: a gateway that sends "true" means true, and one
		// that sends "false" must never read as paid.
		Paid:      v.Status.is("true", "1"),
		Narration: v.Narration,
	}
	if v.Date != "" {
		if out.Date, err = parseDate(v.Date); err != nil {
			return nil, malformed(resp, "verification date "+err.Error())
		}
	}
	return out, nil
}

func parseDate(s string) (time.Time, error) {
	var err error
	for _, layout := range dateLayouts {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}
