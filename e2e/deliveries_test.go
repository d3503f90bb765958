package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kadipay/kadi/client"
)

// The Go client reads and replays the delivery log of the real binary:
// pages by Before, finds one payment's notification, shows an event's
// history, replays it under the same webhook-id, and reports an unknown
// event, a wrong key and a bad filter as the errors they are. Every
// answer goes through the contract-checking transport.
func TestClientDeliveryLog(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
		fmt.Fprint(w, "received")
	}))
	defer receiver.Close()
	received := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), ids...) }

	var m merchantCreds
	g := startGateway(t, func(dir string) {
		m = createMerchant(t, dir, "Delivery Log Shop")
		setTestIPN(t, []string{"--data-dir", dir}, m.MerchantCode, receiver.URL+"/ipn", "shop", "ipn-secret-1")
	}, "--allow-private-ipn", "--ipn-poll", "100ms")
	s := newShopper(t, g, m)
	for _, order := range []string{"LOG1", "LOG2"} {
		b := s.createBill(t, order, "250.00")
		if page := s.submit(t, s.paymentForm(t, b, testCard("4242424242424242"))); !strings.Contains(page.Body, "Transaction Successfull") {
			t.Fatalf("payment of %s: %s", order, page.Body)
		}
	}
	c, ctx := g.Client(t, m), context.Background()
	deliveries := func(f client.DeliveryFilter) []client.Delivery {
		t.Helper()
		ds, err := c.Deliveries(ctx, f)
		if err != nil {
			t.Fatalf("Deliveries(%+v): %v", f, err)
		}
		return ds
	}
	waitFor(t, "both notifications delivered", func() bool {
		return len(deliveries(client.DeliveryFilter{Status: client.DeliveryDelivered})) == 2
	})

	first := deliveries(client.DeliveryFilter{Limit: 1})
	second := deliveries(client.DeliveryFilter{Limit: 1, Before: first[0].ID})
	if len(first) != 1 || len(second) != 1 || first[0].ID == second[0].ID {
		t.Fatalf("pages of one: %+v then %+v", first, second)
	}
	if rest := deliveries(client.DeliveryFilter{Limit: 1, Before: second[0].ID}); len(rest) != 0 {
		t.Errorf("a third page: %+v", rest)
	}
	newest := first[0]
	if !strings.Contains(string(newest.Payload), `"additionalInfo":"LOG2"`) || newest.DeliveredAt.IsZero() ||
		newest.CreatedAt.IsZero() || !newest.NextAttemptAt.IsZero() || newest.Attempts != 1 {
		t.Errorf("newest delivery: %+v (payload %s)", newest, newest.Payload)
	}
	if got := deliveries(client.DeliveryFilter{PaymentID: second[0].PaymentID}); len(got) != 1 || got[0].ID != second[0].ID {
		t.Errorf("by payment %s: %+v", second[0].PaymentID, got)
	}

	d, err := c.Delivery(ctx, newest.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 1 || d.History[0].StatusCode != http.StatusOK || d.History[0].URL != receiver.URL+"/ipn" ||
		d.History[0].Response != "received" || d.History[0].At.IsZero() {
		t.Errorf("history: %+v", d.History)
	}

	replayed, err := c.Redeliver(ctx, newest.ID)
	if err != nil {
		t.Fatal(err)
	}
	if replayed.ID != newest.ID || replayed.Replays != 1 || replayed.Status != client.DeliveryPending {
		t.Errorf("replay: %+v", replayed)
	}
	waitFor(t, "the replayed notification", func() bool { return len(received()) == 3 })
	if got := received(); got[2] != newest.ID {
		t.Errorf("webhook-ids %v: the replay should carry %s", got, newest.ID)
	}
	waitFor(t, "the replay in the history", func() bool {
		d, err := c.Delivery(ctx, newest.ID)
		return err == nil && len(d.History) == 2 && d.Status == client.DeliveryDelivered
	})

	if _, err := c.Delivery(ctx, "msg_000000000000000000000000"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown id: %v, want ErrNotFound", err)
	}
	var apiErr *client.APIError
	if _, err := c.Deliveries(ctx, client.DeliveryFilter{Status: "lost"}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad status filter: %v, want HTTP 400", err)
	}
	wrong := g.clientWithKey(t, m, m.Test.APIKey+"x")
	if _, err := wrong.Deliveries(ctx, client.DeliveryFilter{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a wrong key: %v, want ErrUnauthorized", err)
	}
}
