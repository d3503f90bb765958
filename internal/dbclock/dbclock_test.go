package dbclock

import (
	"context"
	"errors"
	"testing"
	"time"
)

type source struct {
	at     time.Time
	shared bool
	err    error
}

func (s source) DatabaseNow(context.Context) (time.Time, bool, error) { return s.at, s.shared, s.err }

func TestMeasure(t *testing.T) {
	base := time.Date(2026, time.November, 26, 12, 0, 0, 0, time.UTC)
	// local reads base, then base+2ms: the midpoint is base+1ms.
	local := func() func() time.Time {
		n := 0
		return func() time.Time { n++; return base.Add(time.Duration(n-1) * 2 * time.Millisecond) }
	}
	var s Skew
	steps := []struct {
		name    string
		src     source
		want    time.Duration // what Get says after: kept as it was for the last two
		wantErr bool
		wantWas time.Duration
	}{
		{"database ahead", source{at: base.Add(16 * time.Second), shared: true}, 16*time.Second - time.Millisecond, false, 0},
		{"database behind", source{at: base.Add(-3 * time.Second), shared: true}, -3*time.Second - time.Millisecond, false, 16*time.Second - time.Millisecond},
		{"in this process", source{at: base.Add(time.Hour), shared: false}, -3*time.Second - time.Millisecond, false, -3*time.Second - time.Millisecond},
		{"not answering", source{err: errors.New("down"), shared: true}, -3*time.Second - time.Millisecond, true, -3*time.Second - time.Millisecond},
	}
	for _, st := range steps {
		skew, was, _, err := s.Measure(t.Context(), st.src, local())
		if (err != nil) != st.wantErr || skew != st.want || was != st.wantWas || s.Get() != st.want {
			t.Errorf("%s: skew %s (kept %s) was %s, %v; want %s was %s", st.name, skew, s.Get(), was, err, st.want, st.wantWas)
		}
	}
}
