package store

import (
	"sync"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
)

// settled keeps the verifications of paid bills, which never change: a
// successful payment is final (no statement moves a payment out of
// succeeded, and bills and payments are never deleted), its bill stays
// paid, and the query shows nothing else of either. A merchant verifies a
// payment on its callback, again on its notification and again when it
// reconciles; after the first, the answer comes from memory, on every
// node alike, with no read and nothing to invalidate. An unpaid bill's
// verification is never kept: it changes as its attempts do.
//
// The oldest entry is dropped when the cache is full: a merchant verifies
// a payment around the time it is made.
type settled struct {
	mu   sync.RWMutex
	m    map[string]payment.Verification
	ring []string // keys in the order kept; next is the oldest
	next int
}

// maxSettled bounds the cache: about 830 bytes an entry, 14 MB when full
// (BenchmarkSettledSize).
const maxSettled = 1 << 14

func newSettled(size int) *settled {
	return &settled{m: make(map[string]payment.Verification, size), ring: make([]string, size)}
}

// refKey names ref among every merchant's references in both modes: the
// paid verifications' key, and the known bills' (after their kind).
func refKey(merchantCode string, mode merchant.Mode, ref string) string {
	return merchantCode + "\x00" + string(mode) + "\x00" + ref
}

func (c *settled) get(key string) (payment.Verification, bool) {
	c.mu.RLock()
	v, ok := c.m[key]
	c.mu.RUnlock()
	return v, ok
}

// keep holds v as what ref (asked for as key) verifies, if that can never
// change. A ref shaped like a bill reference that was found as an order
// reference is not kept: it was looked up as a bill reference first and
// not found, and a bill drawn later could have it as its reference.
func (c *settled) keep(key, ref string, v payment.Verification) {
	if v.Payment.Status != payment.Succeeded || (v.BillReference != ref && bill.CouldBeReference(ref)) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	if old := c.ring[c.next]; old != "" {
		delete(c.m, old)
	}
	c.ring[c.next] = key
	c.next = (c.next + 1) % len(c.ring)
	c.m[key] = v
}
