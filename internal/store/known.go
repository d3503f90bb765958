package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
)

// knownBills answers "no such bill" without a read, on the one node that
// serves an embedded store. It is a Bloom filter of every bill's reference
// and order reference (each with its merchant and mode): a lookup it says
// was never added is answered not found at once, and anything else is read
// as before, so it can make a lookup cheaper but never change an answer.
// The query for a bill that does not exist is what a merchant asks after a
// bill request timed out (did it get through?) and what a script guessing
// references asks; its one read was half its cost.
//
// It holds only while no other process adds bills to the database: the
// node holds the data directory (LockDataDir), which kadi serve and kadi
// demo take, kadi-load's seeding takes, and no other command adds bills.
// On PostgreSQL other nodes add bills, so there is none. Bills are never
// deleted, and a bill's references never change.
//
// It is filled from the bills table in the background at start, a chunk a
// read transaction, while every bill added meanwhile is added as it is
// written; until the listing is done it answers "perhaps" to everything.
type knownBills struct {
	keys  *bloom
	ready atomic.Bool
}

func knownKey(byOrderReference bool, merchantCode string, mode merchant.Mode, ref string) string {
	kind := "r\x00"
	if byOrderReference {
		kind = "o\x00"
	}
	return kind + refKey(merchantCode, mode, ref)
}

// add is called before b is written, so that no reader sees the bill
// before the filter has it.
func (k *knownBills) add(b bill.Bill) {
	if k == nil {
		return
	}
	k.keys.add(knownKey(false, b.MerchantCode, b.Mode, b.Reference))
	k.keys.add(knownKey(true, b.MerchantCode, b.Mode, b.OrderReference))
}

// mayHave is false only when the merchant has no bill by ref (an order
// reference if byOrderReference, else a bill reference) in mode.
func (k *knownBills) mayHave(byOrderReference bool, merchantCode string, mode merchant.Mode, ref string) bool {
	if k == nil || !k.ready.Load() {
		return true
	}
	return k.keys.mayContain(knownKey(byOrderReference, merchantCode, mode, ref))
}

// knownChunk is how many bills one read transaction of the filling takes:
// a transaction held over ten million rows would keep the WAL from being
// checkpointed meanwhile.
const knownChunk = 20_000

// startKnownBills sizes the filter for the bills stored (two keys each,
// and room for half a million more before it grows) and fills it in the
// background.
func (s *DB) startKnownBills(ctx context.Context) error {
	var highest int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(rowid), 0) FROM bills`).Scan(&highest); err != nil {
		return fmt.Errorf("size the filter of known bills: %w", err)
	}
	s.known = &knownBills{keys: newBloom(2*highest + 1<<20)}
	ctx, s.stopKnown = context.WithCancel(context.WithoutCancel(ctx))
	s.knownDone = make(chan struct{})
	go func() {
		defer close(s.knownDone)
		start := time.Now()
		n, err := s.fillKnownBills(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("could not list the stored bills: every query reads the store", "err", err)
			}
			return
		}
		s.known.ready.Store(true)
		// Said at every start: on a large store it takes seconds, during
		// which each query of no such bill reads, and the filter's memory
		// grows with the bills.
		s.log.Info("listed the stored bills", "bills", n, "took", time.Since(start).Round(time.Millisecond).String(), "filter_bytes", s.known.keys.bytes())
	}()
	return nil
}

// fillKnownBills pages through the bills by rowid, which new bills only
// extend and which nothing but a VACUUM renumbers: Kadi never vacuums a
// live database (kadi backup's VACUUM INTO only reads it).
func (s *DB) fillKnownBills(ctx context.Context) (int, error) {
	var after int64
	n := 0
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT rowid, merchant_code, mode, reference, order_ref FROM bills
			WHERE rowid > ? ORDER BY rowid LIMIT ?`, after, knownChunk)
		if err != nil {
			return n, err
		}
		got := 0
		for rows.Next() {
			var b bill.Bill
			var mode string
			if err := rows.Scan(&after, &b.MerchantCode, &mode, &b.Reference, &b.OrderReference); err != nil {
				rows.Close()
				return n, err
			}
			b.Mode = merchant.Mode(mode)
			s.known.add(b)
			got++
		}
		if err := rows.Close(); err != nil {
			return n, err
		}
		if err := rows.Err(); err != nil {
			return n, err
		}
		n += got
		if got < knownChunk {
			return n, nil
		}
	}
}
