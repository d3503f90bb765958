package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/payment"
)

// SimLedger is the simulated acquirer's durable ledger (sim.Ledger): a
// table of its own in the gateway's database, written in transactions of
// its own, as a bank's records are its own. Every node of a PostgreSQL
// deployment sees the same ledger.
type SimLedger struct {
	db  *DB
	now func() time.Time
}

// SimLedger returns the simulated acquirer's ledger in this database.
func (s *DB) SimLedger() *SimLedger { return &SimLedger{db: s, now: time.Now} }

const simLedgerColumns = `outcome, network_ref, approval_code, decline_code, message, challenge_ref`

// simLedgerInsert records a result unless one is recorded (simLedgerRow).
const simLedgerInsert = `INSERT INTO sim_ledger (payment_id, ` + simLedgerColumns + `, recorded_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payment_id) DO NOTHING`

// simLedgerRow is simLedgerInsert's arguments.
func (l *SimLedger) simLedgerRow(paymentID string, res payment.Result) []any {
	return []any{paymentID, string(res.Outcome), res.NetworkRef, res.ApprovalCode, res.DeclineCode, res.Message, res.ChallengeRef, ms(l.now())}
}

// Entry is the result recorded for paymentID, if any.
func (l *SimLedger) Entry(ctx context.Context, paymentID string) (payment.Result, bool, error) {
	res, err := scanSimResult(l.db.lookup(ctx, `SELECT `+simLedgerColumns+` FROM sim_ledger WHERE payment_id = ?`, paymentID))
	if errors.Is(err, sql.ErrNoRows) {
		return payment.Result{}, false, nil
	}
	if err != nil {
		return payment.Result{}, false, fmt.Errorf("read the simulator's ledger: %w", err)
	}
	return res, true, nil
}

// Record stores res unless a result is recorded for paymentID already, and
// returns the recorded one. The insert is a write of one statement, which
// needs no savepoint in SQLite's group commit nor a transaction of its own
// on PostgreSQL: every charge of a checkout makes it.
func (l *SimLedger) Record(ctx context.Context, paymentID string, res payment.Result) (payment.Result, error) {
	inserted, err := l.db.exec(ctx, simLedgerInsert, l.simLedgerRow(paymentID, res)...)
	if err != nil {
		return payment.Result{}, fmt.Errorf("write the simulator's ledger: %w", err)
	}
	if n, _ := inserted.RowsAffected(); n == 1 {
		return res, nil
	}
	// Recorded before, by a retry or another node: that result stands.
	recorded, ok, err := l.Entry(ctx, paymentID)
	if err == nil && !ok {
		err = fmt.Errorf("the simulator's ledger refused payment %s yet holds nothing for it", paymentID)
	}
	return recorded, err
}

// Settle replaces a pending challenge (or nothing) with res and returns
// the recorded result.
func (l *SimLedger) Settle(ctx context.Context, paymentID string, res payment.Result) (payment.Result, error) {
	var out payment.Result
	err := l.db.inTx(ctx, func(t tx) error {
		// A row written here holds res: only a payment recorded before
		// (by a retry, or another node) needs its row read back.
		updated, err := t.exec(ctx, `UPDATE sim_ledger SET outcome = ?, network_ref = ?, approval_code = ?, decline_code = ?,
			message = ?, challenge_ref = ? WHERE payment_id = ? AND outcome = ?`,
			string(res.Outcome), res.NetworkRef, res.ApprovalCode, res.DeclineCode, res.Message, res.ChallengeRef,
			paymentID, string(payment.ChallengeNeeded))
		if err != nil {
			return err
		}
		if n, _ := updated.RowsAffected(); n == 1 {
			out = res
			return nil
		}
		inserted, err := t.exec(ctx, simLedgerInsert, l.simLedgerRow(paymentID, res)...)
		if err != nil {
			return err
		}
		if n, _ := inserted.RowsAffected(); n == 1 {
			out = res
			return nil
		}
		out, err = scanSimResult(t.queryRow(ctx, `SELECT `+simLedgerColumns+` FROM sim_ledger WHERE payment_id = ?`, paymentID))
		return err
	})
	if err != nil {
		return payment.Result{}, fmt.Errorf("write the simulator's ledger: %w", err)
	}
	return out, nil
}

func scanSimResult(row scanner) (payment.Result, error) {
	var r payment.Result
	var outcome string
	if err := row.Scan(&outcome, &r.NetworkRef, &r.ApprovalCode, &r.DeclineCode, &r.Message, &r.ChallengeRef); err != nil {
		return payment.Result{}, err
	}
	r.Outcome = payment.Outcome(outcome)
	return r, nil
}
