package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// notificationsRequest calls the IPN log with the mode's API key, the one
// credential it takes: bearer tokens reach shoppers' browsers.
func notificationsRequest(method, path, apiKey string) *http.Request {
	req := httptest.NewRequest(method, path, nil)
	req.Header.Set("Authorization", "Basic "+apiKey)
	return req
}

// checked serves req and checks the answer against api/openapi.yaml.
func checked(t *testing.T, g *servertest.Gateway, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := g.Serve(req)
	checkContract(t, req.Method+" "+req.URL.Path, req, rec)
	return rec
}

func decodeInto(t *testing.T, rec *httptest.ResponseRecorder, want int, v any) {
	t.Helper()
	if rec.Code != want {
		t.Fatalf("HTTP %d, want %d: %s", rec.Code, want, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
}

// A merchant reads its IPN log and replays an event through the API,
// scoped to its API key's merchant and mode; replays are audit-logged.
func TestNotificationsAPI(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Notified Shop")
	other := g.Onboard("Other Shop")
	token := g.Token(c, merchant.Test)
	key := servertest.Key(c, merchant.Test)
	paid, _ := g.Pay(c, token, "NOTE1", "1500.00", servertest.Card{Number: approvingCard, CVV: "737"})
	g.Pay(c, token, "NOTE2", "20", servertest.Card{Number: decliningCard, CVV: "737"})

	var list struct{ Notifications []api.NotificationResponse }
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications", key)), http.StatusOK, &list)
	if len(list.Notifications) != 1 {
		t.Fatalf("%d notifications, want 1 (the approved payment only)", len(list.Notifications))
	}
	// The shop has no IPN URL: its notification is parked, with why.
	n := list.Notifications[0]
	if n.Status != "parked" || n.NextAttemptAt != nil || n.DeliveredAt != nil || !strings.HasPrefix(n.LastError, "no IPN URL configured for test mode") ||
		!strings.Contains(string(n.Payload), `"billNumber":"`+paid.Reference+`"`) {
		t.Fatalf("notification %+v, payload %s", n, n.Payload)
	}

	var shown api.NotificationResponse
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications/"+n.ID, key)), http.StatusOK, &shown)
	if shown.ID != n.ID || shown.PaymentID == "" {
		t.Fatalf("shown %+v", shown)
	}

	// Another merchant, the other mode, a malformed id and a missing one
	// all look the same.
	for name, req := range map[string]*http.Request{
		"other merchant":   notificationsRequest(http.MethodGet, "/payment/v2/notifications/"+n.ID, servertest.Key(other, merchant.Test)),
		"live mode":        notificationsRequest(http.MethodGet, "/payment/v2/notifications/"+n.ID, servertest.Key(c, merchant.Live)),
		"other's replay":   notificationsRequest(http.MethodPost, "/payment/v2/notifications/"+n.ID+"/replay", servertest.Key(other, merchant.Test)),
		"malformed id":     notificationsRequest(http.MethodGet, "/payment/v2/notifications/msg_%ff", key),
		"no such event id": notificationsRequest(http.MethodGet, "/payment/v2/notifications/msg_000000000000000000000000", key),
	} {
		if rec := checked(t, g, req); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"not_found"`) {
			t.Errorf("%s: HTTP %d %s", name, rec.Code, rec.Body)
		}
	}
	// An access token where the API key belongs is told so, not "the
	// API key is not valid".
	bearer := httptest.NewRequest(http.MethodGet, "/payment/v2/notifications", nil)
	bearer.Header.Set("Authorization", "Bearer "+token)
	if rec := checked(t, g, bearer); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "takes the API key as HTTP Basic") {
		t.Errorf("an access token on the notifications API: HTTP %d %s", rec.Code, rec.Body)
	}
	var otherList struct{ Notifications []api.NotificationResponse }
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications", servertest.Key(other, merchant.Test))), http.StatusOK, &otherList)
	if len(otherList.Notifications) != 0 {
		t.Errorf("another merchant lists %d of this merchant's notifications", len(otherList.Notifications))
	}
	// The bounds docs/api.md and the Go client's DeliveryFilter state.
	// Each refusal names the parameter at fault, and only it.
	for _, q := range []string{"status=lost", "before=msg_%27", "before=pay_1", "paymentId=pay%27x", "paymentId=nope",
		"limit=0", "limit=501", "limit=-1", "limit=ten"} {
		rec := checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications?"+q, key))
		param, _, _ := strings.Cut(q, "=")
		var body struct{ Message string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(body.Message, param) {
			t.Errorf("%s: HTTP %d %q", q, rec.Code, body.Message)
		}
		for _, other := range []string{"status", "limit", "before", "paymentId"} {
			if other != param && strings.Contains(body.Message, other) {
				t.Errorf("%s: the message names %s too: %q", q, other, body.Message)
			}
		}
	}
	for _, q := range []string{"limit=1", "limit=500"} {
		if rec := checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications?"+q, key)); rec.Code != http.StatusOK {
			t.Errorf("%s: HTTP %d %s", q, rec.Code, rec.Body)
		}
	}
	// Past the newest page, and one payment's event.
	var page struct{ Notifications []api.NotificationResponse }
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications?before="+n.ID, key)), http.StatusOK, &page)
	if len(page.Notifications) != 0 {
		t.Errorf("before the only event: %d", len(page.Notifications))
	}
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications?paymentId="+shown.PaymentID, key)), http.StatusOK, &page)
	if len(page.Notifications) != 1 || page.Notifications[0].ID != n.ID {
		t.Errorf("by payment id: %+v", page.Notifications)
	}
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodGet, "/payment/v2/notifications?paymentId=pay_none", key)), http.StatusOK, &page)
	if len(page.Notifications) != 0 {
		t.Errorf("by another payment id: %+v", page.Notifications)
	}

	var replayed api.NotificationResponse
	decodeInto(t, checked(t, g, notificationsRequest(http.MethodPost, "/payment/v2/notifications/"+n.ID+"/replay", key)), http.StatusAccepted, &replayed)
	if replayed.ID != n.ID || replayed.Replays != 1 || replayed.Status != "pending" {
		t.Errorf("replayed %+v: want the same id, one replay, pending", replayed)
	}
	events, err := g.Store.AuditEvents(context.Background(), c.MerchantCode, 50)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events {
		found = found || (e.Action == audit.IPNReplayed && e.Actor == "api" && strings.Contains(e.Detail, n.ID))
	}
	if !found {
		t.Errorf("no audit entry for the API replay in %+v", events)
	}
}
