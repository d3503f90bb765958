package load

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of /proc's CPU times: 100 on
// every architecture Go supports there.
const clockTick = 10 * time.Millisecond

// CPUTime is the user and system CPU time process pid has used, from
// /proc/PID/stat.
func CPUTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(raw))
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces
// and parentheses itself, so fields are counted from its last ')'.
func parseStat(line string) (time.Duration, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	fields := strings.Fields(line[end+1:])
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, errors.New("proc stat: too few fields")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil || utime < 0 || stime < 0 {
		return 0, fmt.Errorf("proc stat: utime %q, stime %q", fields[11], fields[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// OwnCPU is the user and system CPU time this process has used: kadi-load's
// own, and the store's write benchmarks'. It asks getrusage rather than
// /proc, whose 10 ms ticks round a short scenario's few milliseconds of
// kadi-load's own work down to nothing.
func OwnCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// PeakRSS is the most resident memory process pid has held since it
// started (VmHWM in /proc/PID/status), in bytes.
func PeakRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(string(raw))
}

// parseVmHWM reads the "VmHWM:   12345 kB" line of a /proc/PID/status.
func parseVmHWM(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: VmHWM %q", strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("proc status: VmHWM %q", f[0])
		}
		return kb << 10, nil
	}
	return 0, errors.New("proc status: no VmHWM")
}

// ListenerPID finds the process listening on TCP port on this machine, by
// its socket's inode in /proc/net/tcp{,6} and the process holding it.
func ListenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		for _, inode := range listening(bufio.NewScanner(f), port) {
			inodes["socket:["+inode+"]"] = true
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, proc := range procs {
		fds, _ := os.ReadDir(filepath.Join(proc, "fd"))
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(proc, "fd", fd.Name())); err == nil && inodes[link] {
				return strconv.Atoi(filepath.Base(proc))
			}
		}
	}
	return 0, fmt.Errorf("the process listening on port %d is not ours to read", port)
}

// listening returns the inodes of sockets listening on port in a
// /proc/net/tcp table: "sl local rem st tx:rx tr:when retrnsmt uid timeout
// inode …", ports in hex, state 0A for LISTEN.
func listening(sc *bufio.Scanner, port int) []string {
	var out []string
	want := fmt.Sprintf(":%04X", port)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" || !strings.HasSuffix(f[1], want) {
			continue
		}
		out = append(out, f[9])
	}
	return out
}
