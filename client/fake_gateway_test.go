package client_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// Credentials the fake gateway accepts.
const (
	testAPIKey   = "test-api-key"
	testUsername = "1000000001"
	testPassword = "s3cret-passw0rd"
)

// fakeGateway imitates the wire format of Kadi's API closely enough to drive
// every path of the client; the real server is exercised end to end
// elsewhere. Tests steer it with set, which holds mu.
type fakeGateway struct {
	*httptest.Server

	mu sync.Mutex
	// lifetime is the expires_in of tokens issued from now on.
	lifetime int
	// tokenArrived, if set, receives a value when a token request arrives,
	// and the handler then waits for tokenRelease to be closed.
	tokenArrived chan struct{}
	tokenRelease chan struct{}
	// tokenFails, while true, answers token requests with 503.
	tokenFails bool
	// lockedOut answers token requests with 429 and Retry-After.
	lockedOut bool
	// rejectBearer is how many of the next bearer requests get a 401
	// invalid_token whatever token they carry.
	rejectBearer int

	tokenRequests        int
	paymentTokenRequests int
	billRequests         int
	lastBillBody         []byte
	tokens               map[string]bool
	bills                map[string]*fakeBill // by bill reference
	orders               map[string]string    // order reference → bill reference
	requestSeq           int
	payments             int
}

type fakeBill struct {
	body          string // canonical request body, for idempotency
	orderRef      string
	amount        string
	transactionID string // empty until paid
}

func newFakeGateway() *fakeGateway {
	g := &fakeGateway{
		lifetime: 3600,
		tokens:   map[string]bool{},
		bills:    map[string]*fakeBill{},
		orders:   map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /identity/v2/token", g.token)
	mux.HandleFunc("POST /token", g.paymentToken)
	mux.HandleFunc("POST /payment/v2/bills", g.bearer(g.createBill))
	mux.HandleFunc("GET /payment/v2/query", g.bearer(g.query))
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.requestSeq++
		// The gateway's own shape of id (req_ and 24 hex digits), so the
		// examples print what a merchant will see.
		w.Header().Set("X-Request-Id", fmt.Sprintf("req_%024x", g.requestSeq))
		g.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	return g
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *fakeGateway) token(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.tokenRequests++
	arrived, release := g.tokenArrived, g.tokenRelease
	g.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
		<-release
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	oauthError := func(status int, code, msg string) {
		writeJSON(w, status, map[string]string{"error": code, "error_description": msg, "message": msg})
	}
	switch {
	case g.tokenFails:
		http.Error(w, "<html>upstream down</html>", http.StatusServiceUnavailable)
	case g.lockedOut:
		w.Header().Set("Retry-After", "1800")
		oauthError(http.StatusTooManyRequests, "invalid_grant", "too many failed attempts")
	case r.Header.Get("Authorization") != "Basic "+testAPIKey:
		w.Header().Set("WWW-Authenticate", "Basic")
		oauthError(http.StatusUnauthorized, "invalid_client", "the API key is not valid")
	case r.PostFormValue("username") == "" || r.PostFormValue("password") == "":
		oauthError(http.StatusBadRequest, "invalid_request", "username and password are required")
	case r.PostFormValue("username") != testUsername || r.PostFormValue("password") != testPassword:
		oauthError(http.StatusBadRequest, "invalid_grant", "the username or password is wrong")
	default:
		token := fmt.Sprintf("tok-%d", len(g.tokens)+1)
		g.tokens[token] = true
		writeJSON(w, http.StatusOK, map[string]any{
			"token_type":   "bearer",
			"issued_at":    "1763712000000",
			"expires_in":   g.lifetime,
			"access_token": token,
		})
	}
}

// paymentToken is POST /token: a pay-only token, spec 2.1's second shape.
func (g *fakeGateway) paymentToken(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paymentTokenRequests++
	switch {
	case r.Header.Get("Authorization") != "Basic "+testAPIKey:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "message": "the API key is not valid"})
	case r.PostFormValue("merchantCode") != testUsername || r.PostFormValue("password") != testPassword || r.PostFormValue("grant_type") != "password":
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "message": "the merchant code or password is wrong"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "success",
			"payment-token": fmt.Sprintf("pay-%d", g.paymentTokenRequests), "notification-secret": "whsec_fake"})
	}
}

// revokeTokens is what regenerating the API key does on the real gateway.
func (g *fakeGateway) revokeTokens() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.tokens)
}

func (g *fakeGateway) bearer(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		valid := ok && g.tokens[token] && g.rejectBearer == 0
		if g.rejectBearer > 0 {
			g.rejectBearer--
		}
		g.mu.Unlock()
		if !valid {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="the token expired"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"code": "invalid_token", "message": "the token expired"})
			return
		}
		next(w, r)
	}
}

type fakeBillRequest struct {
	Customer struct {
		Name string `json:"name"`
	} `json:"customer"`
	Order struct {
		BillerCode  string `json:"billerCode"`
		Reference   string `json:"reference"`
		Amount      string `json:"amount"`
		Currency    string `json:"currency"`
		Description string `json:"description"`
		Channel     string `json:"channel"`
		Outlet      string `json:"outlet"`
		Expiry      string `json:"expiry"`
	} `json:"order"`
}

type fieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (g *fakeGateway) createBill(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"code": "invalid_json", "message": err.Error()})
		return
	}
	var req fakeBillRequest
	_ = json.Unmarshal(raw, &req)

	g.mu.Lock()
	defer g.mu.Unlock()
	g.billRequests++
	g.lastBillBody = raw

	var problems []fieldError
	if req.Customer.Name == "" {
		problems = append(problems, fieldError{"customer.name", "required", "is required"})
	}
	amount, err := strconv.ParseFloat(req.Order.Amount, 64)
	if err != nil || amount <= 0 {
		problems = append(problems, fieldError{"order.amount", "not_positive", "must be greater than zero"})
	}
	if req.Order.Channel != "CARD" {
		problems = append(problems, fieldError{"order.channel", "invalid_channel", "order.channel must be CARD"})
	}
	if len(problems) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"status": false, "remarks": "the bill has invalid fields", "errors": problems,
		})
		return
	}

	canonical, _ := json.Marshal(req)
	if ref, ok := g.orders[req.Order.Reference]; ok {
		if g.bills[ref].body != string(canonical) {
			writeJSON(w, http.StatusConflict, map[string]any{
				"status": false, "remarks": "order reference already used with a different bill",
				"errors": []fieldError{{"order.reference", "duplicate", "order.reference was already used"}},
			})
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		g.writeBill(w, ref)
		return
	}
	ref := fmt.Sprintf("KD%010d", len(g.bills)+1)
	g.bills[ref] = &fakeBill{body: string(canonical), orderRef: req.Order.Reference, amount: fmt.Sprintf("%.2f", amount)}
	g.orders[req.Order.Reference] = ref
	g.writeBill(w, ref)
}

func (g *fakeGateway) writeBill(w http.ResponseWriter, ref string) {
	b := g.bills[ref]
	w.Header().Set("Kadi-Bill-State", "open")
	writeJSON(w, http.StatusOK, map[string]string{
		"reference": ref, "amount": b.amount, "serviceId": "600100", "status": "1",
		"orderRef": b.orderRef, "channel": "CARD", "remarks": "bill created", "systemCode": "700200",
	})
}

// pay marks a bill paid, as a successful charge on the hosted form would.
func (g *fakeGateway) pay(billRef string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.payments++
	g.bills[billRef].transactionID = fmt.Sprintf("TX%08d", g.payments)
}

func (g *fakeGateway) query(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("billReference")
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.bills[ref]
	if !ok {
		b, ok = g.bills[g.orders[ref]]
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"code": "not_found", "message": "no bill with that reference"})
		return
	}
	narration := "not paid"
	if b.transactionID != "" {
		narration = "paid by card"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"orderRef": b.orderRef, "transactionId": b.transactionID, "amount": b.amount,
		"status": b.transactionID != "", "date": "2026-11-21T14:03:00+03:00", "narration": narration,
	})
}

// counts returns how many token and bill requests arrived.
func (g *fakeGateway) counts() (tokens, bills int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tokenRequests, g.billRequests
}

// set changes the fake's behaviour under its lock.
func (g *fakeGateway) set(f func(g *fakeGateway)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}
