package dashboard

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

const pageSize = 50

// period is a window of the overview: payments finished in it, per
// currency.
type period struct {
	Name     string
	Volume   []string // "KES 1,500.00", one per currency
	Count    int64
	Approval string // "97.5 %", or "–" with no finished payment
}

// dayBar is one day of the overview's chart.
type dayBar struct {
	Label          string
	X, Y, W, H     int
	Approved, Sent int64
	Volume         string // the day's approved amounts, per currency
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	now := h.Now().In(h.Location)
	today := civilDay(now)
	y, m, d := now.Date()
	since := time.Date(y, m, d-29, 0, 0, 0, 0, h.Location) // midnight there, summer time or not
	quarters, err := h.Store.PaymentTotals(r.Context(), v.Merchant.Code, string(v.Sess.Mode), since)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	totals := h.days(quarters)
	periods := []period{summarize("Today", totals, today), summarize("7 days", totals, today-6), summarize("30 days", totals, today-29)}
	latest, err := h.Store.BillsPage(r.Context(), bill.ListFilter{MerchantCode: v.Merchant.Code, Mode: v.Sess.Mode, Limit: 10, Now: h.Now()})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	rows, err := h.listed(r, latest)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "home.html", map[string]any{"Periods": periods, "Chart": chart(totals, today), "Bills": rows})
}

// listedBill is a row of the payments lists and export: a bill with its
// latest attempt, which tells when it was paid, with which card and under
// which transaction reference (zero when no one has tried to pay it).
type listedBill struct {
	bill.Bill
	Attempt payment.Payment
}

// Paid reports whether the bill is paid and the row's attempt paid it.
// The bill and its attempts are two reads: an attempt that succeeded in
// between is shown with the bill, still processing, at the next reading.
func (l listedBill) Paid() bool { return l.State == bill.Paid && l.Attempt.Status == payment.Succeeded }

// listed reads the latest attempt of each of bills.
func (h *Handler) listed(r *http.Request, bills []bill.Bill) ([]listedBill, error) {
	refs := make([]string, len(bills))
	for i, b := range bills {
		refs[i] = b.Reference
	}
	attempts, err := h.Store.ShownPayments(r.Context(), refs)
	if err != nil {
		return nil, fmt.Errorf("attempts of the listed bills: %w", err)
	}
	rows := make([]listedBill, len(bills))
	for i, b := range bills {
		rows[i] = listedBill{Bill: b, Attempt: attempts[b.Reference]}
	}
	return rows, nil
}

// dayTotal is one day's finished payments of one currency and outcome, in
// the operator's zone.
type dayTotal struct {
	Day      int64 // civilDay
	Currency string
	Status   payment.Status
	Count    int64
	SumMinor int64
}

// days adds quarters up into the operator's days.
func (h *Handler) days(quarters []payment.QuarterTotal) []dayTotal {
	type key struct {
		day              int64
		currency, status string
	}
	index := map[key]int{}
	var out []dayTotal
	for _, q := range quarters {
		k := key{civilDay(q.Start.In(h.Location)), q.Currency, string(q.Status)}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, dayTotal{Day: k.day, Currency: q.Currency, Status: q.Status})
		}
		out[i].Count += q.Count
		out[i].SumMinor += q.SumMinor
	}
	return out
}

// civilDay numbers t's date in its own location: days since 1 January
// 1970 of that calendar.
func civilDay(t time.Time) int64 {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86_400
}

// summarize adds up the days from first on.
func summarize(name string, totals []dayTotal, first int64) period {
	p := period{Name: name, Approval: "–"}
	volume := map[string]int64{}
	var ok, failed int64
	for _, t := range totals {
		if t.Day < first {
			continue
		}
		if t.Status == payment.Succeeded {
			ok += t.Count
			volume[t.Currency] += t.SumMinor
		} else {
			failed += t.Count
		}
	}
	p.Count = ok
	if ok+failed > 0 {
		p.Approval = strconv.FormatFloat(float64(ok)*100/float64(ok+failed), 'f', 1, 64) + " %"
	}
	for _, c := range sortedKeys(volume) {
		if a, err := money.FromMinor(volume[c], c); err == nil {
			p.Volume = append(p.Volume, c+" "+a.Grouped())
		}
	}
	if len(p.Volume) == 0 {
		p.Volume = []string{"0"}
	}
	return p
}

// chart draws 30 days of approved payments as bars, scaled to the busiest
// day, server-side: no charting script.
func chart(totals []dayTotal, today int64) []dayBar {
	ok, all := map[int64]int64{}, map[int64]int64{}
	volume := map[int64][]dayTotal{}
	for _, t := range totals {
		all[t.Day] += t.Count
		if t.Status == payment.Succeeded {
			ok[t.Day] += t.Count
			volume[t.Day] = append(volume[t.Day], t)
		}
	}
	var peak int64 = 1
	for _, n := range ok {
		peak = max(peak, n)
	}
	bars := make([]dayBar, 30)
	for i := range bars {
		day := today - 29 + int64(i)
		height := int(ok[day] * 100 / peak)
		bars[i] = dayBar{Label: time.Unix(day*86_400, 0).UTC().Format("2 Jan"), X: i * 10, Y: 100 - height, W: 8, H: height,
			Approved: ok[day], Sent: all[day], Volume: strings.Join(summarize("", volume[day], day).Volume, ", ")}
	}
	return bars
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// listFilter reads the payments list's query: status, from, to (dates in
// the operator's zone), q (bill or order reference, or a card's last four)
// and after (the keyset cursor).
func (h *Handler) listFilter(r *http.Request) (bill.ListFilter, url.Values, error) {
	v := visitOf(r)
	q := r.URL.Query()
	f := bill.ListFilter{MerchantCode: v.Merchant.Code, Mode: v.Sess.Mode, Limit: pageSize, Now: h.Now()}
	switch st := bill.State(q.Get("status")); st {
	case "", bill.Open, bill.Processing, bill.Paid, bill.Blocked, bill.Expired:
		f.State = st
	default:
		return f, q, errBadInput
	}
	for name, dst := range map[string]*time.Time{"from": &f.From, "to": &f.To} {
		if s := q.Get(name); s != "" {
			d, err := time.ParseInLocation("2006-01-02", s, h.Location)
			if err != nil {
				return f, q, errBadInput
			}
			if name == "to" {
				d = d.AddDate(0, 0, 1) // the whole day
			}
			*dst = d
		}
	}
	f.Search = strings.TrimSpace(q.Get("q"))
	if len(f.Search) > 30 || strings.ContainsFunc(f.Search, func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') }) {
		return f, q, errBadInput
	}
	if a := q.Get("after"); a != "" {
		at, ref, err := parseCursor(a, bill.CouldBeReference)
		if err != nil {
			return f, q, err
		}
		f.After = &bill.Cursor{CreatedAt: at, Reference: ref}
	}
	return f, q, nil
}

func (h *Handler) payments(w http.ResponseWriter, r *http.Request) {
	f, q, err := h.listFilter(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Filter not understood", "Status is one of open, processing, paid, blocked or expired; dates are YYYY-MM-DD; search takes a bill or order reference or the last four digits of a card.")
		return
	}
	f.Limit = pageSize + 1
	bills, err := h.Store.BillsPage(r.Context(), f)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	next := ""
	if len(bills) > pageSize {
		bills = bills[:pageSize]
		last := bills[pageSize-1]
		nq := cloneQuery(q)
		nq.Set("after", cursor(last.CreatedAt, last.Reference))
		next = "/dashboard/payments?" + nq.Encode()
	}
	rows, err := h.listed(r, bills)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	csvq := cloneQuery(q)
	csvq.Del("after")
	filtered := q.Get("status") != "" || q.Get("from") != "" || q.Get("to") != "" || q.Get("q") != "" || q.Get("after") != ""
	h.render(w, r, http.StatusOK, "payments.html", map[string]any{"Bills": rows, "Next": next, "Query": q, "Filtered": filtered,
		"CSV": "/dashboard/payments.csv?" + csvq.Encode(), "Statuses": []bill.State{bill.Open, bill.Processing, bill.Paid, bill.Blocked, bill.Expired}})
}

// paymentsCSV streams the filtered list, page by page on the keyset, so an
// export of a million bills holds one page in memory.
func (h *Handler) paymentsCSV(w http.ResponseWriter, r *http.Request) {
	f, _, err := h.listFilter(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Filter not understood", "Check the filter and try again.")
		return
	}
	v := visitOf(r)
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="kadi-%s-%s-payments.csv"`, v.Merchant.Code, v.Sess.Mode))
	w.Header().Set("Cache-Control", "no-store")
	// A byte order mark: Excel reads a CSV without one in the machine's
	// code page, and "Zoë" came out as "ZoÃ«".
	_, _ = io.WriteString(w, "\ufeff")
	cw := csv.NewWriter(w)
	// New columns go at the end: a reconciliation script may read them by
	// position.
	_ = cw.Write([]string{"created", "bill_reference", "order_reference", "status", "amount", "currency", "customer", "description", "failed_attempts", "expires",
		"paid", "transaction_reference", "card_brand", "card_last4"})
	f.Limit = 500
	for {
		bills, err := h.Store.BillsPage(r.Context(), f)
		if err != nil {
			h.Log.ErrorContext(r.Context(), "csv export", "err", err)
			return
		}
		rows, err := h.listed(r, bills)
		if err != nil {
			h.Log.ErrorContext(r.Context(), "csv export", "err", err)
			return
		}
		for _, b := range rows {
			var paid, ref string
			if b.Paid() {
				// The reference comes from the acquirer, which may be
				// anyone's connector.
				paid, ref = b.Attempt.UpdatedAt.In(h.Location).Format(time.RFC3339), csvSafe(b.Attempt.NetworkRef)
			}
			_ = cw.Write([]string{b.CreatedAt.In(h.Location).Format(time.RFC3339), b.Reference, b.OrderReference, string(b.DisplayState(f.Now)),
				b.Amount.String(), b.Amount.Currency.Code, csvSafe(b.CustomerName), csvSafe(b.Description), strconv.Itoa(b.FailedAttempts),
				b.ExpiresAt.In(h.Location).Format(time.RFC3339), paid, ref, brandName(b.Attempt.Card.Brand), b.Attempt.Card.Last4})
		}
		cw.Flush()
		if len(bills) < f.Limit {
			return
		}
		last := bills[len(bills)-1]
		f.After = &bill.Cursor{CreatedAt: last.CreatedAt, Reference: last.Reference}
	}
}

// csvSafe keeps a spreadsheet from reading a customer's text as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// attemptView is one charge attempt on the bill page.
type attemptView struct {
	payment.Payment
	Event    *ipn.Event
	Attempts []ipn.Attempt
}

// billOf loads the bill named in the path, for the visit's merchant and
// mode only, with every attempt and the notification of the successful one.
func (h *Handler) billOf(r *http.Request) (bill.Bill, []attemptView, error) {
	v := visitOf(r)
	// References are upper case; the search takes them in any case, and
	// so does a typed address.
	ref := strings.ToUpper(r.PathValue("ref"))
	if !bill.CouldBeReference(ref) {
		// Not even the shape of one: not found, without asking the
		// database (PostgreSQL refuses bytes that are not UTF-8: a 500).
		return bill.Bill{}, nil, bill.ErrNotFound
	}
	b, err := h.Store.BillByReference(r.Context(), v.Merchant.Code, v.Sess.Mode, ref)
	if err != nil {
		return b, nil, err
	}
	ps, err := h.Store.PaymentsOfBill(r.Context(), b.Reference)
	if err != nil {
		return b, nil, err
	}
	views := make([]attemptView, len(ps))
	for i, p := range ps {
		views[i].Payment = p
		if p.Status != payment.Succeeded {
			continue
		}
		evs, err := h.Store.IPNEvents(r.Context(), ipn.Filter{MerchantCode: v.Merchant.Code, Mode: v.Sess.Mode, PaymentID: p.ID, Limit: 1})
		if err != nil {
			return b, nil, err
		}
		if len(evs) == 1 {
			views[i].Event = &evs[0]
			if views[i].Attempts, err = h.Store.IPNAttempts(r.Context(), evs[0].ID); err != nil {
				return b, nil, err
			}
		}
	}
	return b, views, nil
}

func (h *Handler) billPage(w http.ResponseWriter, r *http.Request) {
	b, views, err := h.billOf(r)
	if errors.Is(err, bill.ErrNotFound) {
		h.notFound(w, r)
		return
	} else if err != nil {
		h.internal(w, r, err)
		return
	}
	// A paid bill shows when it was paid, not when it would have expired.
	var paidAt time.Time
	for _, v := range views {
		if v.Status == payment.Succeeded {
			paidAt = v.UpdatedAt
		}
	}
	h.render(w, r, http.StatusOK, "bill.html", h.takeNote(w, r, map[string]any{"Bill": b, "State": b.DisplayState(h.Now()), "Payments": views,
		"PaidAt": paidAt}))
}

// resendIPN replays the bill's notification: a new round, the same
// webhook-id.
func (h *Handler) resendIPN(w http.ResponseWriter, r *http.Request) {
	b, views, err := h.billOf(r)
	if errors.Is(err, bill.ErrNotFound) {
		h.notFound(w, r)
		return
	} else if err != nil {
		h.internal(w, r, err)
		return
	}
	for _, a := range views {
		if a.Event == nil {
			continue
		}
		if _, err := h.Store.ReplayIPN(r.Context(), a.Event.ID, h.Now(), "dashboard "+clientIP(r)); err != nil {
			h.internal(w, r, err)
			return
		}
		h.back(w, r, "/dashboard/payments/"+b.Reference, "The notification is on its way again (same webhook-id).")
		return
	}
	h.fail(w, r, http.StatusConflict, "No notification to resend", "Only a paid bill has a notification.")
}
