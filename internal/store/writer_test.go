package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"modernc.org/sqlite"

	"github.com/kadipay/kadi/internal/outage"
)

func openSQLite(tb testing.TB) *DB {
	tb.Helper()
	s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "kadi.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if _, err := s.exec(context.Background(), `CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	return s
}

// holdWriter makes the writer busy until release is called, so that the
// writes queued meanwhile commit as one group.
func holdWriter(t *testing.T, s *DB) (release func()) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.inTx(context.Background(), func(tx) error { close(started); <-gate; return nil })
	}()
	<-started
	return func() {
		close(gate)
		if err := <-done; err != nil {
			t.Errorf("the holding write: %v", err)
		}
	}
}

// queued waits until n writes are queued behind the held writer.
func queued(t *testing.T, s *DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(s.writes.queue) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", len(s.writes.queue), n)
		}
	}
}

// inOneGroup queues writes behind a held writer, in order, then lets them
// commit, checks they did as one group, and returns each one's error.
func inOneGroup(t *testing.T, s *DB, writes ...func() error) []error {
	t.Helper()
	before := s.writes.commits.Load()
	release := holdWriter(t, s)
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, write := range writes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = write() }()
		queued(t, s, i+1)
	}
	release()
	wg.Wait()
	// The holding write, then the queued ones as one group.
	if got := s.writes.commits.Load() - before; got != 2 {
		t.Errorf("%d commits, want 2: the queued writes were not grouped", got)
	}
	return errs
}

func count(t *testing.T, s *DB, where string, args ...any) int {
	t.Helper()
	var n int
	if err := s.queryRow(context.Background(), `SELECT COUNT(*) FROM t WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// In one group commit, a write that fails (an error, a constraint, a
// panic) is undone alone and gets its own error; its neighbours commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('taken', 0)`); err != nil {
		t.Fatal(err)
	}

	errRefused := errors.New("refused by its own rule")
	writes := []struct {
		name string
		fn   func(t tx) error
		want error // nil: commits
	}{
		{"ok 1", func(t tx) error { _, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('ok1', 1)`); return err }, nil},
		{"refused after writing", func(t tx) error {
			if _, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('refused', 2)`); err != nil {
				return err
			}
			return errRefused
		}, errRefused},
		{"constraint", func(t tx) error {
			if _, err := t.exec(ctx, `UPDATE t SET v = 99 WHERE k = 'taken'`); err != nil {
				return err
			}
			_, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('taken', 3)`)
			return err
		}, errAny},
		{"panic", func(t tx) error {
			if _, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('panicked', 4)`); err != nil {
				return err
			}
			panic("a bug in one write")
		}, errAny},
		{"ok 2", func(t tx) error { _, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('ok2', 5)`); return err }, nil},
	}
	var fns []func() error
	for _, w := range writes {
		fns = append(fns, func() error { return s.inTx(ctx, w.fn) })
	}
	errs := inOneGroup(t, s, fns...)

	for i, w := range writes {
		switch {
		case w.want == nil && errs[i] != nil:
			t.Errorf("%s: %v, want it committed", w.name, errs[i])
		case w.want == errAny && errs[i] == nil, w.want != nil && w.want != errAny && !errors.Is(errs[i], w.want):
			t.Errorf("%s: err %v, want %v", w.name, errs[i], w.want)
		}
	}
	for k, want := range map[string]int{"ok1": 1, "ok2": 1, "refused": 0, "panicked": 0} {
		if n := count(t, s, `k = ?`, k); n != want {
			t.Errorf("row %s: %d, want %d", k, n, want)
		}
	}
	if n := count(t, s, `k = 'taken' AND v = 0`); n != 1 {
		t.Error("the failed write's earlier statement was not undone")
	}
}

// A one-statement write (DB.exec) runs in a group without a savepoint of
// its own: SQLite undoes a failed statement whole, even one that had
// written rows before it failed, and its neighbours commit.
func TestGroupCommitOneStatementFailsAlone(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('taken', 0)`); err != nil {
		t.Fatal(err)
	}
	writes := []struct {
		name, q string
		fails   bool
	}{
		{"ok 1", `INSERT INTO t (k, v) VALUES ('ok1', 1)`, false},
		{"conflict after a row", `INSERT INTO t (k, v) VALUES ('half', 2), ('taken', 2)`, true},
		{"update", `UPDATE t SET v = 7 WHERE k = 'taken'`, false},
		{"conflict", `INSERT INTO t (k, v) VALUES ('ok1', 3)`, true},
		{"ok 2", `INSERT INTO t (k, v) VALUES ('ok2', 4)`, false},
	}
	var fns []func() error
	for _, w := range writes {
		fns = append(fns, func() error { _, err := s.exec(ctx, w.q); return err })
	}
	errs := inOneGroup(t, s, fns...)
	for i, w := range writes {
		if (errs[i] != nil) != w.fails {
			t.Errorf("%s: err %v, want failed=%v", w.name, errs[i], w.fails)
		}
	}
	for k, want := range map[string]int{"ok1": 1, "ok2": 1, "half": 0} {
		if n := count(t, s, `k = ?`, k); n != want {
			t.Errorf("row %s: %d, want %d", k, n, want)
		}
	}
	if n := count(t, s, `k = 'taken' AND v = 7`); n != 1 {
		t.Error("the update after a failed statement was lost")
	}
	if n := count(t, s, `k = 'ok1' AND v = 1`); n != 1 {
		t.Error("a failed insert changed the row it conflicted with")
	}
}

// A write that fails for a reason after which SQLite may have dropped the
// whole transaction (here a full database: SQLITE_FULL) ends its group:
// the writes after it do not run outside a transaction, what the writes
// before it did is undone, and every write of the group is told so.
func TestGroupCommitStopsAtAFullDatabase(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	// The database may not grow: a row that needs a new page fails with
	// SQLITE_FULL. The setting is each connection's own, and the writer
	// writes on a connection of its own: it is set there.
	var pages int
	if err := s.queryRow(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	err := s.writes.do(ctx, func(t tx) error {
		_, err := t.exec(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	writes := []struct{ name, k string }{
		{"fits before", "small1"},
		{"needs pages", strings.Repeat("x", 64<<10)},
		{"fits after", "small2"},
	}
	var fns []func() error
	for _, w := range writes {
		fns = append(fns, func() error { _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES (?, 1)`, w.k); return err })
	}
	errs := inOneGroup(t, s, fns...)
	if !outage.Is(errs[1]) {
		t.Fatalf("the large row: %v, want SQLITE_FULL", errs[1])
	}
	for i, w := range writes {
		if errs[i] == nil {
			t.Errorf("%s: committed, want the group's failure", w.name)
		}
	}
	if n := count(t, s, `1 = 1`); n != 0 {
		t.Errorf("%d rows on disk, want none of the group's", n)
	}
	// The writer goes on: a row that fits commits in the next group, in a
	// transaction of its own (the failed group's was ended, whether SQLite
	// had ended it or not).
	if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('next', 1)`); err != nil {
		t.Fatalf("a write after the failed group: %v", err)
	}
	if n := count(t, s, `k = 'next'`); n != 1 {
		t.Errorf("the write after the failed group is on disk %d times, want 1", n)
	}
}

// errAny marks a write that must fail, whatever the error.
var errAny = errors.New("any error")

// Conditional updates that race on one row, grouped or not, have one
// winner: each runs after the one before it in the same transaction.
func TestGroupCommitOneWinner(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('bill', 0)`); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	const n = 40
	won := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.exec(ctx, `UPDATE t SET v = ? WHERE k = 'bill' AND v = 0`, i+1)
			if err != nil {
				t.Error(err)
				return
			}
			rows, _ := res.RowsAffected()
			won[i] = rows == 1
		}()
	}
	queued(t, s, n)
	release()
	wg.Wait()
	winners := 0
	for _, w := range won {
		if w {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d winners, want 1", winners)
	}
}

// A write's result is read without waiting for the writer: database/sql
// reads a result under its connection's lock, which the writer holds
// through every statement and COMMIT of the groups after it. Here the next
// group's statement stops inside the writer (in kadi_test_pause, a SQL
// function) until the first write's result has been read.
func TestGroupCommitResultNeedsNoWriter(t *testing.T) {
	entered, resume := make(chan struct{}), make(chan struct{})
	pauseStatement.Store(&pause{entered: entered, resume: resume})
	t.Cleanup(func() { pauseStatement.Store(nil) })
	s := openSQLite(t)
	ctx := context.Background()
	res, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('first', 1)`)
	if err != nil {
		t.Fatal(err)
	}
	paused := make(chan error, 1)
	go func() {
		_, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('second', kadi_test_pause())`)
		paused <- err
	}()
	<-entered
	read := make(chan int64, 1)
	go func() { n, _ := res.RowsAffected(); read <- n }()
	select {
	case n := <-read:
		if n != 1 {
			t.Errorf("first write: %d rows affected, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Error("reading the first write's result waited for the writer's next statement")
	}
	close(resume)
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
}

// pause is where kadi_test_pause stops: it says it has entered, then waits.
type pause struct{ entered, resume chan struct{} }

var pauseStatement atomic.Pointer[pause]

func init() {
	sqlite.MustRegisterScalarFunction("kadi_test_pause", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		if p := pauseStatement.Load(); p != nil {
			close(p.entered)
			<-p.resume
		}
		return int64(2), nil
	})
}

// A caller that gives up while queued is told so and its write never runs;
// one that gives up while its write runs still gets the true outcome.
func TestGroupCommitCancelled(t *testing.T) {
	s := openSQLite(t)
	release := holdWriter(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('gave up', 1)`)
		done <- err
	}()
	queued(t, s, 1)
	cancel()
	// Answered while the commit ahead still runs: a caller who left is
	// not held to the end of a commit that does not carry its write.
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("a write given up while queued waited for the commit ahead of it")
	}
	release()
	// The writer, taking it after its caller left, does not run it.
	if _, err := s.exec(context.Background(), `INSERT INTO t (k, v) VALUES ('after', 1)`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `k = 'gave up'`); n != 0 {
		t.Error("a write given up while queued ran")
	}

	ctx, cancel = context.WithCancel(context.Background())
	err := s.inTx(ctx, func(t tx) error {
		cancel() // the caller leaves mid-write
		_, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('ran', 1)`)
		return err
	})
	if err != nil || count(t, s, `k = 'ran'`) != 1 {
		t.Errorf("a write whose caller left while it ran: %v, row there: %v", err, count(t, s, `k = 'ran'`) == 1)
	}
}

// A write whose deadline passed while it was queued is told so and never
// runs; the writes grouped with it commit. A deadline's error reads as an
// outage (it is a net.Error), which in a write that ran ends its group:
// taken for one, it failed every write in the same commit (an IPN claim
// beside a lease renewal that had timed out).
func TestGroupCommitDeadlineWhileQueuedFailsAlone(t *testing.T) {
	s := openSQLite(t)
	release := holdWriter(t, s)
	insert := func(ctx context.Context, k string) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES (?, 1)`, k); done <- err }()
		return done
	}
	before := insert(context.Background(), "before")
	queued(t, s, 1)
	// Its deadline passes once it is queued, however slow the machine.
	deadline := &passing{Context: context.Background(), done: make(chan struct{})}
	late := insert(deadline, "late")
	queued(t, s, 2)
	after := insert(context.Background(), "after")
	queued(t, s, 3)
	close(deadline.done)
	if err := <-late; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the late write: %v, want its deadline", err)
	}
	release()
	for name, done := range map[string]<-chan error{"before": before, "after": after} {
		if err := <-done; err != nil {
			t.Errorf("%s, grouped with a write whose deadline passed: %v", name, err)
		}
	}
	if n := count(t, s, `k IN ('before', 'after')`); n != 2 {
		t.Errorf("%d of the 2 neighbours on disk", n)
	}
	if n := count(t, s, `k = 'late'`); n != 0 {
		t.Error("a write whose deadline passed while queued ran")
	}
}

// passing is a context whose deadline passes when done is closed.
type passing struct {
	context.Context
	done chan struct{}
}

func (p *passing) Done() <-chan struct{} { return p.done }

func (p *passing) Err() error {
	select {
	case <-p.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Close commits what is queued, then refuses.
func TestGroupCommitClose(t *testing.T) {
	s := openSQLite(t)
	release := holdWriter(t, s)
	done := make(chan error, 1)
	go func() {
		_, err := s.exec(context.Background(), `INSERT INTO t (k, v) VALUES ('queued', 1)`)
		done <- err
	}()
	queued(t, s, 1)
	closed := make(chan struct{})
	go func() { s.writes.close(); close(closed) }()
	release()
	<-closed
	if err := <-done; err != nil {
		t.Errorf("a write queued before Close: %v", err)
	}
	if _, err := s.exec(context.Background(), `INSERT INTO t (k, v) VALUES ('late', 1)`); !errors.Is(err, errClosed) {
		t.Errorf("a write after Close: %v, want errClosed", err)
	}
}

// BenchmarkWrites compares group commit with one commit per write, each
// write one INSERT, from many goroutines at once.
func BenchmarkWrites(b *testing.B) {
	for _, max := range []int{1, maxBatch} {
		name := "grouped"
		if max == 1 {
			name = "one commit each"
		}
		b.Run(name, func(b *testing.B) {
			s := openSQLite(b)
			s.writes.max = max
			before := s.writes.commits.Load()
			var seq sync.Mutex
			n := 0
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					seq.Lock()
					n++
					k := fmt.Sprint(n)
					seq.Unlock()
					if _, err := s.exec(context.Background(), `INSERT INTO t (k, v) VALUES (?, 1)`, k); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/float64(s.writes.commits.Load()-before), "writes/commit")
		})
	}
}

// BenchmarkFlush is what the writer waits for at every commit: an fsync of
// about what a commit of a dozen bills writes, in place, as the WAL is
// rewritten from its start. It measures the disk and the machine, not
// Kadi: run it beside busy loops to see what a loaded machine does to the
// wait (docs/performance.md); TMPDIR picks the disk.
func BenchmarkFlush(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "flush"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const size, slots = 48 << 10, 64
	page := make([]byte, size)
	for range slots {
		if _, err := f.Write(page); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.WriteAt(page, int64(i%slots)*size); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	for _, p := range []int{50, 90, 99} {
		b.ReportMetric(float64(took[(len(took)-1)*p/100].Microseconds())/1000, fmt.Sprintf("ms-p%d", p))
	}
}

// TestCheckpointBesideTheWriter: committed writes reach the database file
// itself soon after their commit, copied by the checkpointer, long before
// the WAL's 1,000 pages would make the writer's own commit copy them.
func TestCheckpointBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kadi.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.exec(ctx, `CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, fmt.Sprint(i), i); err != nil {
			t.Fatal(err)
		}
	}
	// immutable: read the database file alone, as if there were no WAL.
	file, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	// A new connection for each look: an immutable file's pages, once
	// read, are never read again.
	file.SetMaxIdleConns(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := file.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&n)
		if err == nil && n == 10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file holds %d of 10 committed rows (%v) 10 s after their commit: nothing checkpointed them", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The checkpointer's counters tell an operator what it did: a checkpoint
// that copied the whole WAL leaves no frame behind, and one that failed
// is counted as failed, not as done.
func TestCheckpointerCounts(t *testing.T) {
	s, ctx := openSQLite(t), t.Context()
	w := s.writes
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A reader in the middle of a read transaction pins what the WAL
	// held when it began: what is committed after cannot all be copied.
	reader, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, fmt.Sprint(i), i); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer beside the writer runs after commits only: once
	// the last commit's kick is served, it stays idle and the counts
	// below are this test's own.
	time.Sleep(20 * checkpointGap)
	runs, failures := w.checkpoints.Load(), w.checkpointFailures.Load()
	w.checkpointOnce(conn)
	if w.behindFrames.Load() == 0 {
		t.Error("no WAL frame left behind while a reader holds an older snapshot")
	}
	_ = reader.Rollback()
	w.checkpointOnce(conn)
	if got := w.behindFrames.Load(); got != 0 {
		t.Errorf("%d WAL frames behind once the reader ended", got)
	}
	_ = conn.Close()
	w.checkpointOnce(conn)
	if got, want := w.checkpoints.Load()-runs, int64(3); got != want {
		t.Errorf("%d checkpoints counted, want %d", got, want)
	}
	if got := w.checkpointFailures.Load() - failures; got != 1 {
		t.Errorf("%d failures counted after a checkpoint on a closed connection, want 1", got)
	}
}

// TestCommitsBesideACheckpoint: a commit during which a checkpoint ran
// is timed in kadi_store_commit_beside_checkpoint_seconds too, and one
// with none beside it is not: that series is how an operator tells a
// commit slowed by the checkpoint's writes from one slowed by the disk.
func TestCommitsBesideACheckpoint(t *testing.T) {
	s, ctx := openSQLite(t), t.Context()
	w := s.writes
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.besideCheckpoint, w.commitTime)
	counts := func() (beside, all uint64) {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			n := f.GetMetric()[0].GetHistogram().GetSampleCount()
			if f.GetName() == "kadi_store_commit_beside_checkpoint_seconds" {
				beside = n
			} else {
				all = n
			}
		}
		return beside, all
	}
	insert := func(k string) {
		t.Helper()
		if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES (?, 1)`, k); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The checkpointer runs after commits only: once the last commit's
	// checkpoint has run, none runs until the next commit.
	quiet := func() { time.Sleep(20 * checkpointGap) }

	insert("a")
	quiet()
	beside0, all0 := counts()
	insert("alone")
	if beside, all := counts(); all != all0+1 || beside != beside0 {
		t.Fatalf("a commit with no checkpoint beside it: %d commits timed beside one, %d in all, want %d and %d", beside, all, beside0, all0+1)
	}

	// A commit held open while a real checkpoint runs and ends.
	quiet()
	release := holdWriter(t, s)
	w.checkpointOnce(conn)
	release()
	if beside, all := counts(); all != all0+2 || beside != beside0+1 {
		t.Fatalf("a commit a checkpoint ran beside: %d commits timed beside one, %d in all, want %d and %d", beside, all, beside0+1, all0+2)
	}

	// A checkpoint that began before the commit and ends after it.
	quiet()
	w.checkpoints.Add(1) // begun, as checkpointOnce counts it
	insert("during")
	w.checkpointsEnded.Add(1)
	if beside, all := counts(); all != all0+3 || beside != beside0+2 {
		t.Fatalf("a commit inside a checkpoint: %d commits timed beside one, %d in all, want %d and %d", beside, all, beside0+2, all0+3)
	}
}

// TestGroupCommitEndedByAnOutageIsRolledBack: a write that fails as an
// outage after writing ends its group, and the writer rolls the group's
// transaction back itself: SQLite ends it on some errors, but not on one
// that comes from the write's own code, and the next group would then
// fail to begin.
func TestGroupCommitEndedByAnOutageIsRolledBack(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	errs := inOneGroup(t, s,
		func() error { _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('neighbour', 1)`); return err },
		func() error {
			return s.writes.do(ctx, func(t tx) error {
				if _, err := t.exec(ctx, `INSERT INTO t (k, v) VALUES ('wrote', 1)`); err != nil {
					return err
				}
				return fmt.Errorf("then: %w", outage.ErrTimedOut)
			})
		},
	)
	if !outage.Is(errs[1]) || errs[0] == nil {
		t.Fatalf("the group: %v, %v; want both failed, the second as an outage", errs[0], errs[1])
	}
	if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('next', 1)`); err != nil {
		t.Fatalf("a write after the group an outage ended: %v", err)
	}
	if n := count(t, s, `1 = 1`); n != 1 {
		t.Errorf("%d rows on disk, want only the write after the group", n)
	}
}

// TestGroupCommitAfterARefusedCommit: a COMMIT that SQLite refuses and
// leaves open (here for a deferred foreign key) fails its group, and the
// writer rolls it back: the next group begins a transaction of its own
// instead of failing for one already open, which would have refused
// every write until a restart.
func TestGroupCommitAfterARefusedCommit(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	if _, err := s.exec(ctx, `CREATE TABLE parent (id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.exec(ctx, `CREATE TABLE child (id TEXT PRIMARY KEY,
		parent_id TEXT NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	errs := inOneGroup(t, s,
		func() error { _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES ('neighbour', 1)`); return err },
		func() error {
			_, err := s.exec(ctx, `INSERT INTO child (id, parent_id) VALUES ('c1', 'nobody')`)
			return err
		},
	)
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "commit") {
			t.Errorf("write %d of the refused group: %v, want the commit's failure", i, err)
		}
	}
	for i := range 3 {
		if _, err := s.exec(ctx, `INSERT INTO t (k, v) VALUES (?, 2)`, fmt.Sprint("after", i)); err != nil {
			t.Fatalf("write %d after the refused commit: %v", i, err)
		}
	}
	if n := count(t, s, `k = 'neighbour'`); n != 0 {
		t.Errorf("the refused group's neighbour is on disk %d times, want 0", n)
	}
	if n := count(t, s, `k LIKE 'after%'`); n != 3 {
		t.Errorf("%d writes after the refused commit on disk, want 3", n)
	}
}

// TestWriterKeepsItsConnection: every group commits on the writer's own
// connection, whatever readers take from the pool in between (a pooled
// connection's page cache is dropped whenever another connection has
// written since its last use), and that connection alone keeps its
// statement journal in memory. A TEMP table is seen only by the
// connection that made it: the writer's, in every later group.
func TestWriterKeepsItsConnection(t *testing.T) {
	s, ctx := openSQLite(t), t.Context()
	write := func(fn func(tx) error) {
		t.Helper()
		if err := s.writes.do(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(t tx) error {
		_, err := t.exec(ctx, `CREATE TEMP TABLE mark (n INTEGER)`)
		return err
	})
	for i := 1; i <= 5; i++ {
		// The pool hands out the connection returned last: a writer
		// borrowing from the pool would have its previous one taken here.
		held, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var store int
		if err := held.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&store); err != nil {
			t.Fatal(err)
		}
		if store != 0 {
			t.Errorf("a reader's connection has temp_store %d, want 0 (the default): only the writer's journal is kept in memory", store)
		}
		var marks int
		write(func(t tx) error {
			if _, err := t.exec(ctx, `INSERT INTO temp.mark (n) VALUES (?)`, i); err != nil {
				return fmt.Errorf("group %d ran on another connection than the first's: %w", i, err)
			}
			if err := t.queryRow(ctx, `PRAGMA temp_store`).Scan(&store); err != nil {
				return err
			}
			return t.queryRow(ctx, `SELECT COUNT(*) FROM temp.mark`).Scan(&marks)
		})
		held.Close()
		if marks != i {
			t.Fatalf("group %d sees %d of its connection's marks, want %d", i, marks, i)
		}
		if store != 2 {
			t.Errorf("the writer's connection has temp_store %d, want 2 (MEMORY): its savepoints' journal spills to a file", store)
		}
	}
}

// TestReadersHaveEightConnections: the writer and the checkpointer each
// hold a connection for good, and the pool keeps eight more for readers,
// all of them open once opened (a new SQLite connection parses the whole
// schema and prepares its statements again). The writer needs none of
// the readers': with every one held, a write whose text it has never
// seen (so never prepared) still commits.
func TestReadersHaveEightConnections(t *testing.T) {
	s, ctx := openSQLite(t), t.Context()
	for round := range 3 {
		var held []*sql.Conn
		release := func() {
			for _, c := range held {
				c.Close()
			}
			held = nil
		}
		for i := range 8 {
			// With fewer than eight for readers this one would wait for
			// a held one: it times out instead.
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := s.db.Conn(cctx)
			cancel()
			if err != nil {
				release()
				t.Fatalf("round %d: reader %d got no connection while %d readers held one: %v", round, i+1, i, err)
			}
			held = append(held, c)
			var one int
			if err := c.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
				release()
				t.Fatal(err)
			}
		}
		written := make(chan error, 1)
		go func() {
			_, err := s.exec(ctx, fmt.Sprintf(`INSERT INTO t (k, v) VALUES (?, %d)`, round), fmt.Sprint(round))
			written <- err
		}()
		select {
		case err := <-written:
			if err != nil {
				t.Errorf("round %d: a write while eight readers held a connection: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("round %d: a write of a text never seen before waited 10 s while eight readers held a connection: the writer needs one of theirs", round)
			release()
			<-written
		}
		release()
	}
	st := s.db.Stats()
	if st.OpenConnections != 10 || st.MaxIdleClosed != 0 || st.MaxLifetimeClosed != 0 || st.MaxIdleTimeClosed != 0 {
		t.Errorf("after three rounds of eight readers: %d connections open, %d closed as idle past the limit, %d past their lifetime, %d past their idle time; want 10, 0, 0, 0",
			st.OpenConnections, st.MaxIdleClosed, st.MaxLifetimeClosed, st.MaxIdleTimeClosed)
	}
}

// TestStatementCachesAreBounded: the pool's cache and the writer's each
// keep at most maxStatements texts, and none longer than 4,096 bytes;
// past the bound a text still runs, unprepared.
func TestStatementCachesAreBounded(t *testing.T) {
	s, ctx := openSQLite(t), t.Context()
	long := "INSERT INTO t (k, v) VALUES (?, 1) -- " + strings.Repeat("x", 4096)
	if _, err := s.exec(ctx, long, "long"); err != nil {
		t.Fatal(err)
	}
	if _, kept := s.writes.stmts[long]; kept {
		t.Error("the writer kept a text longer than 4,096 bytes")
	}
	for i := range maxStatements + 10 {
		if _, err := s.exec(ctx, fmt.Sprintf(`INSERT INTO t (k, v) VALUES (?, %d)`, i), fmt.Sprint(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		var n int
		if err := s.queryRow(ctx, fmt.Sprintf(`SELECT COUNT(*) + %d FROM t`, i)).Scan(&n); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if n := count(t, s, `1 = 1`); n != maxStatements+11 {
		t.Errorf("%d rows, want %d: a write past the bound was lost", n, maxStatements+11)
	}
	if n := len(s.writes.stmts); n != maxStatements {
		t.Errorf("the writer keeps %d statements, want %d", n, maxStatements)
	}
	if n := s.nstmts.Load(); n != maxStatements {
		t.Errorf("the pool's cache keeps %d statements, want %d", n, maxStatements)
	}
}
