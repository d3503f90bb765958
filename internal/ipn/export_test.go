package ipn

import "time"

// ReadClockEvery makes w read the database's clock every d instead of
// every readClockEvery.
func (w *Worker) ReadClockEvery(d time.Duration) { w.clockEvery = d }

// LeaseNow is now by the database's clock, as w last read it.
func (w *Worker) LeaseNow() time.Time { return w.leaseNow() }
