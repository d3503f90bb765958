package ipn

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const secretPrefix = "whsec_"

// ErrBadSecret: a notification secret is not "whsec_" and base64.
var ErrBadSecret = errors.New("notification secret must be whsec_ followed by base64")

// SigningKey decodes a "whsec_…" notification secret into the HMAC key.
func SigningKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) == 0 || !strings.HasPrefix(secret, secretPrefix) {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the webhook-signature value for one request: "v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body".
func Sign(key []byte, id string, at time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(at.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
