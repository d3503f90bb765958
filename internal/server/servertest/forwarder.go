package servertest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Forwarder is a TCP hop between the gateway and its database that a test
// can cut and mend: a database outage as the gateway meets it (connections
// reset, new ones refused), while the database itself runs on.
type Forwarder struct {
	tb     testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	// frozen holds every byte in both directions, connections open: a
	// database host that hangs (a partition, a stopped VM) rather than
	// resetting them.
	frozen atomic.Bool
}

// Freeze stops passing bytes, new connections' included, and keeps every
// connection open, until Thaw.
func (f *Forwarder) Freeze() { f.frozen.Store(true) }

// Thaw passes the bytes held and goes on forwarding.
func (f *Forwarder) Thaw() { f.frozen.Store(false) }

// Forward listens on a free loopback port and forwards to target.
func Forward(tb testing.TB, target string) *Forwarder {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &Forwarder{tb: tb, target: target, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	f.serve(ln)
	tb.Cleanup(f.Cut)
	return f
}

// Addr is where the gateway connects.
func (f *Forwarder) Addr() string { return f.addr }

// Cut closes every forwarded connection and refuses new ones.
func (f *Forwarder) Cut() {
	f.frozen.Store(false)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}

// Mend forwards again, on the same address.
func (f *Forwarder) Mend() {
	f.tb.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.tb.Fatalf("listen again on %s: %v", f.addr, err)
	}
	f.serve(ln)
}

func (f *Forwarder) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", f.target)
			if err != nil {
				in.Close()
				continue
			}
			f.mu.Lock()
			if f.ln != ln { // cut meanwhile
				f.mu.Unlock()
				in.Close()
				out.Close()
				return
			}
			f.conns[in], f.conns[out] = true, true
			f.mu.Unlock()
			go f.pipe(in, out)
			go f.pipe(out, in)
		}
	}()
}

func (f *Forwarder) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for f.frozen.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}
