package ipn

import (
	"errors"
	"net/url"

	"github.com/kadipay/kadi/internal/merchant"
)

// CheckURL validates an IPN receiver URL when it is saved: absolute http(s),
// https in live mode, no credentials or fragment. The address it resolves to
// is checked again at every connection.
func CheckURL(raw string, mode merchant.Mode) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("IPN URL must be an absolute http or https URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("IPN URL must be an absolute http or https URL")
	case mode == merchant.Live && u.Scheme != "https":
		return errors.New("live-mode IPN URL must use https")
	case u.User != nil:
		return errors.New("IPN URL must not carry credentials: use --username and --password")
	case u.Fragment != "":
		return errors.New("IPN URL must not have a fragment")
	}
	return nil
}
