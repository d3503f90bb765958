package load

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       time.Duration
		bad        bool
	}{
		{"plain", "4242 (kadi) S 1 4242 4242 0 -1 4194560 2195 0 0 0 150 37 0 0 20 0 9 0 123 0 0", 187 * clockTick, false},
		{"spaces and parentheses in the name", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0", 7 * clockTick, false},
		{"no name", "7 kadi R 1", 0, true},
		{"too short", "7 (kadi) R 1 2 3", 0, true},
		{"not numbers", "7 (kadi) R 1 7 7 0 -1 0 0 0 0 0 x y 0 0", 0, true},
		{"negative", "7 (kadi) R 1 7 7 0 -1 0 0 0 0 0 -1 2 0 0", 0, true},
	} {
		got, err := parseStat(tc.line)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("%s: %v, %v; want %v (error %v)", tc.name, got, err, tc.want, tc.bad)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
		bad          bool
	}{
		{"plain", "Name:\tkadi\nVmPeak:\t  900000 kB\nVmHWM:\t   73728 kB\nVmRSS:\t   60000 kB\n", 73728 << 10, false},
		{"last line without a newline", "Name:\tkadi\nVmHWM:\t 1 kB", 1 << 10, false},
		{"none (a kernel thread)", "Name:\tkthreadd\nState:\tS\n", 0, true},
		{"another unit", "VmHWM:\t 1 MB\n", 0, true},
		{"not a number", "VmHWM:\t x kB\n", 0, true},
		{"negative", "VmHWM:\t -1 kB\n", 0, true},
	} {
		got, err := parseVmHWM(tc.status)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("%s: %v, %v; want %v (error %v)", tc.name, got, err, tc.want, tc.bad)
		}
	}
}

func TestListening(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1
   2: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0
`
	got := listening(bufio.NewScanner(strings.NewReader(table)), 8080)
	if len(got) != 1 || got[0] != "111" {
		t.Errorf("listening on 8080: %v, want [111] (not the established socket, not 8081)", got)
	}
}

// This process, listening and burning a little CPU, is found and read.
func TestListenerPIDAndCPUTime(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := ListenerPID(ln.Addr().(*net.TCPAddr).Port)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("ListenerPID = %d, %v; want %d", pid, err, os.Getpid())
	}
	before, err := CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := CPUTime(pid)
	if err != nil || after <= before {
		t.Errorf("CPU time %v then %v (%v): it does not move", before, after, err)
	}
}

// TestOwnCPUIsFinerThanATick: kadi-load's own CPU in a short scenario is a
// few milliseconds, which /proc's 10 ms ticks would often round to
// nothing. While this test spins, OwnCPU must move in steps smaller than a
// tick (the first few steps may be longer, if the runtime's own threads
// ran meanwhile; /proc's never are).
func TestOwnCPUIsFinerThanATick(t *testing.T) {
	last, err := OwnCPU()
	if err != nil {
		t.Fatal(err)
	}
	var steps []time.Duration
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(steps) < 20; {
		now, err := OwnCPU()
		if err != nil {
			t.Fatal(err)
		}
		if now == last {
			continue
		}
		step := now - last
		last = now
		if step < 0 {
			t.Fatalf("OwnCPU went back by %v", -step)
		}
		if step < clockTick {
			return
		}
		steps = append(steps, step)
	}
	t.Fatalf("OwnCPU moved only by steps of a tick or more: %v", steps)
}
