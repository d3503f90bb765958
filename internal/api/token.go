package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/formdata"
	"github.com/kadipay/kadi/internal/jsoncheck"
)

// TokenResponse is spec 2.1's first shape.
type TokenResponse struct {
	TokenType   string `json:"token_type"`
	IssuedAt    string `json:"issued_at"`
	ExpiresIn   int64  `json:"expires_in"`
	AccessToken string `json:"access_token"`
}

// PaymentTokenResponse is spec 2.1's second shape, from POST /token.
type PaymentTokenResponse struct {
	Status             string `json:"status"`
	PaymentToken       string `json:"payment-token"`
	NotificationSecret string `json:"notification-secret"`
}

func (h *Handler) accessToken(w http.ResponseWriter, r *http.Request) {
	fields, err := readFields(r)
	if err != nil {
		h.failOAuth(w, r, err)
		return
	}
	issued, err := h.Auth.Issue(r.Context(), auth.Grant{
		APIKey: apiKeyFromBasic(r.Header.Get("Authorization")), Username: strings.TrimSpace(fields.Get("username")),
		Password: fields.Get("password"), ClientIP: clientIP(r), Scope: auth.ScopeAPI,
	})
	if err != nil {
		h.failOAuth(w, r, err)
		return
	}
	c := issued.Claims
	writeJSON(w, http.StatusOK, TokenResponse{
		TokenType:   "bearer",
		IssuedAt:    strconv.FormatInt(c.IssuedAt.UnixMilli(), 10),
		ExpiresIn:   int64(c.ExpiresAt.Sub(c.IssuedAt).Seconds()),
		AccessToken: issued.Token,
	})
}

func (h *Handler) paymentToken(w http.ResponseWriter, r *http.Request) {
	fields, err := readFields(r)
	if err != nil {
		h.failOAuth(w, r, err)
		return
	}
	switch fields.Get("grant_type") {
	case "password":
	case "":
		h.failOAuth(w, r, &auth.RequestError{Code: "invalid_request", Message: "grant_type is required and must be password"})
		return
	default:
		h.failOAuth(w, r, &auth.RequestError{Code: "unsupported_grant_type", Message: "grant_type must be password"})
		return
	}
	// The spec's text calls the merchant code the username too: take
	// either name for it.
	// Trimmed as the bills' and the form's fields are: " 4000000001 " was
	// told the key belonged to another merchant code.
	code, named := strings.TrimSpace(fields.Get("merchantCode")), "merchantCode"
	if code == "" && fields.Has("username") {
		code, named = strings.TrimSpace(fields.Get("username")), "username"
	}
	issued, err := h.Auth.Issue(r.Context(), auth.Grant{
		APIKey: apiKeyFromBasic(r.Header.Get("Authorization")), Username: code, UsernameField: named,
		Password: fields.Get("password"), ClientIP: clientIP(r), KeyAsPassword: true,
		// The payment-token is made for the shopper's browser: it pays, and
		// does nothing else (docs/security.md).
		Scope: auth.ScopePay,
	})
	if err != nil {
		h.failOAuth(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, PaymentTokenResponse{Status: "success", PaymentToken: issued.Token, NotificationSecret: issued.NotificationSecret})
}

// apiKeyFromBasic reads "Basic <API_KEY>". The spec sends the raw key; some
// HTTP libraries insist on base64("key:"), which we accept too, and
// standard Basic auth as libraries build it from a username and password
// (Python's requests, PHP's CURLOPT_USERPWD), base64("MERCHANT_CODE:key"),
// whose refusal said only "the API key is not valid". The key is checked
// all the same, and against the merchant the body names.
func apiKeyFromBasic(header string) string {
	scheme, value, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	value = strings.TrimSpace(value)
	if strings.HasPrefix(value, "kadi_") {
		return value
	}
	if raw, err := base64.StdEncoding.DecodeString(value); err == nil {
		user, password, _ := strings.Cut(string(raw), ":")
		switch {
		case strings.HasPrefix(user, "kadi_"):
			return user
		case strings.HasPrefix(password, "kadi_"):
			return password
		}
	}
	return value
}

// readFields reads a form body whatever the Content-Type says; a JSON
// object is accepted too, its strings and numbers as written (a merchant
// code sent as a JSON number is the same digits: decoded as a float it
// became "3.146610628e+09", a wrong username counted towards the lock).
// Any other JSON value is not text: 400, not counted.
func readFields(r *http.Request) (url.Values, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '{' {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || dec.More() {
			return nil, &auth.RequestError{Code: "invalid_request", Message: "the body is neither form-encoded nor a JSON object"}
		}
		if err := jsoncheck.UniqueNames(body); err != nil {
			return nil, &auth.RequestError{Code: "invalid_request", Message: "the JSON body has a " + err.Error()}
		}
		v := url.Values{}
		for k, x := range m {
			switch x := x.(type) {
			case string:
				v.Set(k, x)
			case json.Number:
				v.Set(k, x.String())
			case nil:
			default:
				if tokenFields[k] {
					return nil, &auth.RequestError{Code: "invalid_request", Message: fmt.Sprintf("the field %q is not text", clip(k))}
				}
				// A field of the client's own ("remember": true) is
				// ignored, as the bills' unknown fields are.
			}
		}
		return v, nil
	}
	if len(body) > 0 && body[0] == '[' && json.Valid(body) {
		// Read as form encoding it named no field, and was told
		// "username and password are required".
		return nil, &auth.RequestError{Code: "invalid_request", Message: "the JSON body must be an object of fields, not an array"}
	}
	var v url.Values
	if boundary, ok := formdata.Boundary(r.Header.Get("Content-Type")); ok {
		// What PHP's cURL sends for an array body and fetch for a
		// FormData: the same fields, in parts.
		if v, err = formdata.Read(body, boundary); err != nil {
			return nil, &auth.RequestError{Code: "invalid_request", Message: err.Error()}
		}
	} else if v, err = url.ParseQuery(string(body)); err != nil {
		return nil, &auth.RequestError{Code: "invalid_request", Message: "the body is not valid form encoding"}
	}
	// Kadi reads a field's first copy and PHP its last: a repeated field
	// would be one request with two readings.
	for k, vals := range v {
		if len(vals) > 1 {
			return nil, &auth.RequestError{Code: "invalid_request", Message: fmt.Sprintf("the form repeats the field %q", clip(k))}
		}
	}
	return v, nil
}

// tokenFields are the fields the token endpoints read.
var tokenFields = map[string]bool{"username": true, "password": true, "merchantCode": true, "grant_type": true}

// clip keeps a client's field name short in an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
