package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kadipay/kadi/internal/outage"
)

// Group commit (SQLite). A commit in WAL mode with synchronous=FULL costs
// an fsync, and SQLite runs one writer at a time: committing each request
// on its own caps the gateway at the disk's fsync rate. So one goroutine
// writes: it takes every write waiting at that moment (at most maxBatch),
// runs each under its own SAVEPOINT in one transaction, commits once, and
// only then answers them all. A write that fails rolls back to its
// savepoint and gets its own error while its neighbours commit (a write of
// one statement has SQLite's statement journal for its savepoint, which
// undoes a failed statement whole, and takes no other); a commit
// that fails fails every write in it; none is answered before its commit is
// on disk. With nothing else waiting, a write is committed at once: there
// is no timer.
//
// PostgreSQL needs none of this: its writers run side by side, each
// transaction on its own connection.

// maxBatch bounds a batch: a longer transaction delays its first write's
// answer for little fsync saved.
const maxBatch = 64

// errClosed is a write after Close.
var errClosed = errors.New("store is closed")

// write is one caller's transaction waiting for the writer.
type write struct {
	ctx    context.Context
	fn     func(tx) error
	done   chan error
	queued time.Time
	// oneStatement: fn runs a single statement (writer.exec), which
	// SQLite undoes alone when it fails (its statement journal is a
	// savepoint of its own), so it needs none from the writer.
	oneStatement bool
	// state says who has the write: the writer, which runs it (taken),
	// or its caller, who left while it was queued (abandoned). Whoever
	// moves it from waiting first decides; the other side abides.
	state atomic.Int32
}

// A write's states.
const (
	waiting int32 = iota
	taken
	abandoned
)

// writer is the queue and goroutine that commit SQLite writes in groups.
type writer struct {
	s *DB
	// conn is the writer's own connection, for its life: its page cache
	// stays warm between groups (SQLite drops a connection's whole cache
	// when it begins a transaction after another connection wrote, which
	// a pooled connection, lent to readers in between, nearly always
	// has), and its statements are prepared on it once. It runs its
	// transactions as statements (BEGIN IMMEDIATE, COMMIT), so that its
	// writes' statements are its own, prepared once on it, and no write
	// waits for a connection of the pool that readers may all hold.
	conn *sql.Conn
	// stmts is the writer's statement cache, by query text; only its
	// goroutine touches it.
	stmts  map[string]*sql.Stmt
	queue  chan *write
	max    int          // writes in one commit at most
	mu     sync.RWMutex // held to send; Close takes it to close the queue
	closed bool
	done   chan struct{}
	// commits counts transactions committed or rolled back, writes the
	// writes they carried and busy the time spent running them: their
	// ratios are the grouping and the writer's load (kadi_store_* on
	// /metrics, docs/performance.md).
	commits, writes atomic.Int64
	busy            atomic.Int64 // nanoseconds
	// commitTime is how long each commit took and waitTime how long each
	// write waited for its commit to begin: together a write's time in
	// the store, and where a slow request's milliseconds went (a commit
	// that checkpointed the WAL, or a queue behind one).
	commitTime, waitTime prometheus.Histogram
	// besideCheckpoint is commitTime for the commits a checkpoint ran
	// beside, at any moment: the checkpoint's page writes and fsync go to
	// the same disk as the commit's, and at half the peak the slow
	// commits were mostly these (docs/performance.md, session 38).
	besideCheckpoint prometheus.Histogram
	// kick asks the checkpointer to copy the WAL into the database file;
	// checkpointed is closed when it has stopped.
	kick         chan struct{}
	checkpointed chan struct{}
	// checkpoints counts the checkpoints run and checkpointFailures those
	// that failed (the writer's automatic checkpoint then does the copy,
	// inside a commit: the tail this one exists to keep out);
	// behindFrames is how many WAL frames the last one left uncopied
	// (kadi_store_* on /metrics). A reader holding an old snapshot, or a
	// disk that cannot keep up, shows as frames left behind.
	checkpoints, checkpointFailures, behindFrames atomic.Int64
	// checkpointsEnded counts the checkpoints that have returned, failed
	// or not: fewer than checkpoints while one runs.
	checkpointsEnded atomic.Int64
}

// checkpointGap spaces the background checkpoints.
const checkpointGap = 5 * time.Millisecond

// checkpoint copies committed WAL frames into the database file, on a
// connection of its own, beside the writer, whenever commits kick it (at
// most one per checkpointGap). Left to SQLite, the copy happens inside the
// commit that takes the WAL past 1,000 pages, and every write queued
// behind that commit waits for its two fsyncs: the half-peak tail. Run
// here, a PASSIVE checkpoint takes no lock the writer needs, the WAL
// restarts from its beginning while it is short, and the writer's own
// automatic checkpoint stays as the fallback should this one fall behind
// or fail.
func (w *writer) checkpoint(conn *sql.Conn) {
	defer close(w.checkpointed)
	defer conn.Close()
	for range w.kick {
		w.checkpointOnce(conn)
		time.Sleep(checkpointGap)
	}
}

// checkpointOnce runs one PASSIVE checkpoint on conn and counts it.
func (w *writer) checkpointOnce(conn *sql.Conn) {
	w.checkpoints.Add(1)
	defer w.checkpointsEnded.Add(1)
	// busy is 1 when the checkpoint could not finish; frames is the WAL's
	// length and copied how much of it is now in the database file.
	var busy, frames, copied int64
	err := conn.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	if err != nil {
		w.checkpointFailures.Add(1)
		return
	}
	w.behindFrames.Store(max(frames-copied, 0))
}

// writerBuckets span a commit alone (an fsync, a quarter of a
// millisecond on a fast disk) to a stalled disk's second.
var writerBuckets = prometheus.ExponentialBuckets(0.000125, 2, 14)

func startWriter(ctx context.Context, s *DB) (*writer, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open the writer's connection: %w", err)
	}
	// A write's savepoint copies each page it changes into the statement
	// journal, which SQLite spills to a temporary file past 64 KiB: a
	// system call for each page of a checkout's larger writes. A group's
	// journal is a few pages a write and at most maxBatch writes, and is
	// dropped at its commit: memory is enough. Readers keep the default.
	if _, err := conn.ExecContext(ctx, `PRAGMA temp_store = MEMORY`); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set up the writer's connection: %w", err)
	}
	w := &writer{s: s, conn: conn, stmts: map[string]*sql.Stmt{}, queue: make(chan *write, maxBatch), max: maxBatch, done: make(chan struct{}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kadi_store_commit_duration_seconds",
			Help: "How long each commit of the SQLite group-commit writer took, its writes and its fsync included.", Buckets: writerBuckets}),
		waitTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kadi_store_write_wait_seconds",
			Help: "How long each write waited for the SQLite group-commit writer to begin the commit that carries it.", Buckets: writerBuckets}),
		besideCheckpoint: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kadi_store_commit_beside_checkpoint_seconds",
			Help: "How long each commit of the SQLite group-commit writer took when a WAL checkpoint ran beside it (among kadi_store_commit_duration_seconds): if the slow commits are these, the checkpoint's writes and fsync are holding up the commits' on the disk.", Buckets: writerBuckets}),
	}
	if cp, err := s.db.Conn(ctx); err == nil {
		w.kick, w.checkpointed = make(chan struct{}, 1), make(chan struct{})
		go w.checkpoint(cp)
	}
	go w.run()
	return w, nil
}

// do queues fn and waits for the commit that carries it. A caller whose
// context ends while fn is queued is answered at once with its error, and
// fn never runs; once the writer has taken fn it runs to the end (an
// interrupted SQLite statement inside a transaction would roll back the
// whole batch), and the caller waits for the commit, so an answer always
// means what it says.
func (w *writer) do(ctx context.Context, fn func(tx) error) error {
	return w.submit(ctx, fn, false)
}

// exec runs statement q as a write of its own, as do does with a fn; being
// one statement, it needs no savepoint in its group.
func (w *writer) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	var res rowsAffected
	fn := func(t tx) error {
		r, err := t.exec(ctx, q, args...)
		if err != nil {
			return err
		}
		// Read now, inside the writer, which holds the connection through
		// the next group's statements and COMMIT, fsync included: read
		// after the answer, it waited for a commit not its own.
		res = readResult(r)
		return nil
	}
	if err := w.submit(ctx, fn, true); err != nil {
		return nil, err
	}
	return res, nil
}

// submit queues fn as a write and waits for its answer.
func (w *writer) submit(ctx context.Context, fn func(tx) error, oneStatement bool) error {
	req := &write{ctx: ctx, fn: fn, done: make(chan error, 1), queued: time.Now(), oneStatement: oneStatement}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return errClosed
	}
	select {
	case w.queue <- req:
	case <-ctx.Done():
		w.mu.RUnlock()
		return ctx.Err()
	}
	w.mu.RUnlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// A shopper who left while a commit ahead took its time (on
		// SQLite a statement cannot be interrupted, only not started)
		// held a request to the end of a commit that never carried it.
		if req.state.CompareAndSwap(waiting, abandoned) {
			return ctx.Err()
		}
		return <-req.done // taken: it runs and commits, or fails, as answered
	}
}

// close stops taking writes, lets the queued ones commit and waits.
func (w *writer) close() {
	w.mu.Lock()
	first := !w.closed
	if first {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	if w.kick == nil {
		return
	}
	if first {
		close(w.kick) // the writer, the only sender, has stopped
	}
	<-w.checkpointed
}

func (w *writer) run() {
	defer close(w.done)
	defer w.conn.Close()
	defer func() {
		for _, st := range w.stmts {
			st.Close()
		}
	}()
	batch := make([]*write, 0, maxBatch)
	for first := range w.queue {
		batch = append(batch[:0], first)
	more:
		for len(batch) < w.max {
			select {
			case req, ok := <-w.queue:
				if !ok {
					break more
				}
				batch = append(batch, req)
			default:
				break more
			}
		}
		w.commit(batch)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// commit runs batch in one transaction and answers every write in it,
// once the commit is counted and timed: a caller that has its answer
// finds its commit in the metrics.
func (w *writer) commit(batch []*write) {
	// A checkpoint ran beside the commit if one had begun and not ended
	// when the commit began, or began during it: more begun by its end
	// than ended by its start.
	ended := w.checkpointsEnded.Load()
	start := time.Now()
	for _, req := range batch {
		w.waitTime.Observe(start.Sub(req.queued).Seconds())
	}
	errs := make([]error, len(batch))
	defer func() {
		took := time.Since(start)
		w.busy.Add(int64(took))
		w.commitTime.Observe(took.Seconds())
		if w.checkpoints.Load() > ended {
			w.besideCheckpoint.Observe(took.Seconds())
		}
		w.commits.Add(1)
		w.writes.Add(int64(len(batch)))
		for i, req := range batch {
			req.done <- errs[i]
		}
	}()
	// The transaction's own statements; a write's run under its caller's
	// values (run1).
	ctx, t := context.Background(), tx{w: w, s: w.s}
	if _, err := t.exec(ctx, `BEGIN IMMEDIATE`); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("begin: %w", err)
		}
		return
	}
	// rollback ends the transaction whatever state an error left it in:
	// SQLite undoes it by itself on some errors (then ROLLBACK fails,
	// harmlessly) and not on others, such as a COMMIT refused for a
	// deferred constraint, after which the next BEGIN would fail.
	rollback := func() { _, _ = t.exec(ctx, `ROLLBACK`) }
	if len(batch) == 1 {
		// Alone: the transaction is the write's own, no savepoint needed.
		if _, errs[0] = w.run1(batch[0], false); errs[0] != nil {
			rollback()
			return
		}
	} else {
		for i, req := range batch {
			var ran bool
			ran, errs[i] = w.run1(req, !req.oneStatement)
			// A write whose caller gave up while it was queued never
			// touched the transaction: its error (a deadline reads as an
			// outage) says nothing of its neighbours'.
			if ran && outage.Is(errs[i]) {
				// A full disk, an I/O error, no memory or a lock not
				// taken: SQLite may have rolled the whole transaction
				// back by itself, not only the failed statement
				// (sqlite.org/lang_transaction.html, "Response To Errors
				// Within A Transaction"). The writes after it would then
				// run outside any transaction, each committing alone, and
				// be told the group's COMMIT failed: none runs, and what
				// the group wrote is undone if SQLite has not undone it.
				rollback()
				for j := range errs {
					if j != i {
						errs[j] = fmt.Errorf("not written: another write in the same commit failed: %w", errs[i])
					}
				}
				return
			}
		}
	}
	if _, err := t.exec(ctx, `COMMIT`); err != nil {
		rollback()
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("commit: %w", err)
			}
		}
	}
}

// prepared is DB.prepared on the writer's own connection.
func (w *writer) prepared(ctx context.Context, q string) (*sql.Stmt, string, error) {
	if w.s.onPrepare != nil {
		w.s.onPrepare(q)
	}
	if st, ok := w.stmts[q]; ok {
		return st, "", nil
	}
	text := w.s.d.rebind(q)
	if !keepPrepared(q, len(w.stmts)) {
		return nil, text, nil
	}
	st, err := w.conn.PrepareContext(ctx, text)
	if err != nil {
		return nil, "", err
	}
	w.stmts[q] = st
	return st, "", nil
}

// run1 runs one write; isolated puts it under a savepoint so that its
// failure undoes it alone. A panic is the write's error, not the writer's
// end. ran is false for a write given up while queued, which never runs.
func (w *writer) run1(req *write, isolated bool) (ran bool, err error) {
	if !req.state.CompareAndSwap(waiting, taken) || req.ctx.Err() != nil {
		return false, req.ctx.Err()
	}
	ran = true
	// Values (the request id for logs) stay; cancellation does not.
	ctx := context.WithoutCancel(req.ctx)
	t := tx{w: w, s: w.s, ctx: ctx}
	if isolated {
		if _, err := t.exec(ctx, `SAVEPOINT w`); err != nil {
			return ran, fmt.Errorf("savepoint: %w", err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v", p)
		}
		if !isolated {
			return
		}
		if err != nil {
			if _, rbErr := t.exec(ctx, `ROLLBACK TO w`); rbErr != nil {
				err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rbErr))
			}
		}
		if _, relErr := t.exec(ctx, `RELEASE w`); relErr != nil && err == nil {
			err = fmt.Errorf("release savepoint: %w", relErr)
		}
	}()
	return ran, req.fn(t)
}
