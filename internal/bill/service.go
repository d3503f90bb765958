package bill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

var (
	// ErrNotFound: no such bill for this merchant and mode.
	ErrNotFound = errors.New("bill not found")
	// ErrReferenceReused: the order reference already names a different bill.
	ErrReferenceReused = errors.New("order reference already used for a different bill")
	// ErrDuplicateReference is what a Repo returns when the generated bill
	// reference collides; Create draws another.
	ErrDuplicateReference = errors.New("bill reference collision")
)

// IdempotencyWindow is how long an identical retry returns the original bill.
const IdempotencyWindow = 24 * time.Hour

// Repo is the storage the bill service needs.
type Repo interface {
	// InsertBill stores b, unless the merchant already has a bill with the
	// same order reference in the same mode: then it returns that bill and
	// created=false.
	InsertBill(ctx context.Context, b Bill) (stored Bill, created bool, err error)
	BillByReference(ctx context.Context, merchantCode string, mode merchant.Mode, reference string) (Bill, error)
	BillByOrderReference(ctx context.Context, merchantCode string, mode merchant.Mode, orderRef string) (Bill, error)
}

// Service creates and finds bills.
type Service struct {
	Repo    Repo
	Policy  Policy
	Now     func() time.Time
	Metrics *Metrics // nil: none
}

// Create validates req and stores a new bill. An identical retry within the
// idempotency window returns the original bill; replay reports that case.
func (s *Service) Create(ctx context.Context, m merchant.Merchant, mode merchant.Mode, req Request) (b Bill, replay bool, err error) {
	now := s.Now()
	b, err = Validate(req, m, s.Policy, now)
	if err != nil {
		if stored, ok := s.retryAfterExpiry(ctx, m, mode, req, now, err); ok {
			return stored, true, nil
		}
		return Bill{}, false, err
	}
	b.Mode = mode
	b.State = Open
	b.CreatedAt = now
	for range 5 {
		b.Reference = secret.RandomString(12, secret.Unambiguous)
		stored, created, err := s.Repo.InsertBill(ctx, b)
		switch {
		case errors.Is(err, ErrDuplicateReference):
			continue
		case err != nil:
			return Bill{}, false, fmt.Errorf("store bill: %w", err)
		case created:
			s.Metrics.created(mode)
			return stored, false, nil
		case !b.sameRequest(stored, s.Policy.MaxTTL):
			return Bill{}, false, &ReusedError{Differ: b.differences(stored)}
		case now.Sub(stored.CreatedAt) < IdempotencyWindow:
			return stored, true, nil
		default:
			return Bill{}, false, &ReusedError{}
		}
	}
	return Bill{}, false, errors.New("could not draw a unique bill reference")
}

// ReusedError is ErrReferenceReused saying what an integrator must fix:
// the request's fields that differ from the bill the order reference
// names, or none when the request is the same but that bill is older than
// IdempotencyWindow. "With different details" left them comparing bodies
// field by field.
type ReusedError struct{ Differ []string }

func (e *ReusedError) Error() string {
	if len(e.Differ) == 0 {
		return "order reference already used, by a bill created over 24 hours ago: a request is a retry of it only within 24 hours; give a new order reference"
	}
	return "order reference already used for a bill with another " + strings.Join(e.Differ, ", ") + ": an identical request is a retry, anything else needs a new order reference"
}

// FieldMessage is what the refusal says of order.reference in a field
// error: "is already used by a bill …".
func (e *ReusedError) FieldMessage() string {
	if len(e.Differ) == 0 {
		return "is already used by a bill created over 24 hours ago"
	}
	return "is already used by a bill with another " + strings.Join(e.Differ, ", ")
}

func (e *ReusedError) Is(target error) bool { return target == ErrReferenceReused }

// differences names the request fields of b that stored asked otherwise;
// when none of those does, it was the expiry.
func (b Bill) differences(stored Bill) []string {
	mine, theirs := b.requestFields(), stored.requestFields()
	var differ []string
	for i, name := range requestFieldNames {
		if !sameText(mine[i], theirs[i]) {
			differ = append(differ, name)
		}
	}
	if len(differ) == 0 {
		differ = []string{"order.expiry"}
	}
	return differ
}

// retryAfterExpiry finds the bill an identical retry names when its one
// fault is an order.expiry that has passed since the original request: the
// retry is judged as of that request, so a merchant retrying on a network
// error is not told its bill failed. Only that fault: a retry breaking any
// other rule was never accepted.
func (s *Service) retryAfterExpiry(ctx context.Context, m merchant.Merchant, mode merchant.Mode, req Request, now time.Time, err error) (Bill, bool) {
	var v *ValidationError
	if !errors.As(err, &v) || len(v.Fields) == 0 {
		return Bill{}, false
	}
	for _, f := range v.Fields {
		if f.Field != "order.expiry" || f.Code != CodeInPast {
			return Bill{}, false
		}
	}
	stored, err := s.Repo.BillByOrderReference(ctx, m.Code, mode, trimSpaces(req.Order.Reference.Value))
	if err != nil || now.Sub(stored.CreatedAt) >= IdempotencyWindow {
		return Bill{}, false
	}
	then, err := Validate(req, m, s.Policy, stored.CreatedAt)
	if err != nil || !then.sameRequest(stored, s.Policy.MaxTTL) {
		return Bill{}, false
	}
	return stored, true
}

// FindEither looks ref up with find, as a bill reference and then as the
// merchant's order reference (the spec's own example fills billReference
// with the latter). Only something shaped like a bill reference is looked
// up as one: every reference ever drawn has that shape.
func FindEither[T any](ref string, find func(byOrderReference bool) (T, error)) (T, error) {
	if !CouldBeReference(ref) {
		return find(true)
	}
	v, err := find(false)
	if errors.Is(err, ErrNotFound) {
		return find(true)
	}
	return v, err
}

// CouldBeReference reports whether ref has the shape of a bill reference
// of any version: 12 upper-case letters and digits (the ambiguous ones
// included: references drawn before the unambiguous alphabet have them).
func CouldBeReference(ref string) bool {
	if len(ref) != 12 {
		return false
	}
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
