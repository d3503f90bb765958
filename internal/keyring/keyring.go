package keyring

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kadipay/kadi/internal/secret"
)

// Keyring is a node's live copy of the ring. When it came from a file it
// follows the file: Watch re-reads it on an interval, and meeting a key id
// it does not hold re-reads it at once, so a node that has not caught up
// with a rotation yet accepts whatever a node that has would.
type Keyring struct {
	path  string // "": fixed for the life of the process
	ring  atomic.Pointer[Ring]
	mu    sync.Mutex   // one reload at a time; guards raw and log
	raw   []byte       // the file's content ring was read from
	log   *slog.Logger // set by Watch: says when a reload took a new ring
	fixed map[string][]byte
}

// New returns a Keyring that holds r for good.
func New(r Ring) *Keyring {
	k := &Keyring{}
	k.ring.Store(&r)
	k.fixed = fixedKeys(r)
	return k
}

// Load reads the ring in path and follows the file from then on.
func Load(path string) (*Keyring, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read master key ring: %w", err)
	}
	r, err := Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("master key ring %s: %w", path, err)
	}
	k := New(r)
	k.path, k.raw = path, raw
	return k, nil
}

func fixedKeys(r Ring) map[string][]byte {
	m := map[string][]byte{}
	for _, p := range Fixed {
		m[p] = r.FixedKey(p)
	}
	return m
}

// Path is the file the ring follows ("" when none).
func (k *Keyring) Path() string { return k.path }

// Ring is the ring as last read.
func (k *Keyring) Ring() Ring { return *k.ring.Load() }

// FixedKey is purpose's key that never rotates (see Fixed).
func (k *Keyring) FixedKey(purpose string) []byte { return k.fixed[purpose] }

// Reload re-reads the file and takes its ring if it changed. A ring that
// does not parse, or that would change a fixed purpose's key (its pinned
// lines lost), is refused: the node keeps the ring it has.
func (k *Keyring) Reload() (changed bool, err error) { return k.reload("asked") }

func (k *Keyring) reload(why string) (changed bool, err error) {
	if k.path == "" {
		return false, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	raw, err := os.ReadFile(k.path)
	if err != nil {
		return false, fmt.Errorf("read master key ring: %w", err)
	}
	if bytes.Equal(raw, k.raw) {
		return false, nil
	}
	r, err := Parse(string(raw))
	if err != nil {
		return false, fmt.Errorf("master key ring %s changed but %w; keeping the previous ring", k.path, err)
	}
	// In Fixed's order, not a map's, so that the refusal names every key
	// it would change, the same way each time.
	var changedKeys []string
	for _, p := range Fixed {
		if !bytes.Equal(r.FixedKey(p), k.fixed[p]) {
			changedKeys = append(changedKeys, p)
		}
	}
	if len(changedKeys) > 0 {
		noun := "key"
		if len(changedKeys) > 1 {
			noun = "keys"
		}
		return false, fmt.Errorf("master key ring %s changed the %s %s (a pinned line or the oldest key was removed); keeping the previous ring",
			k.path, strings.Join(changedKeys, " and "), noun)
	}
	k.raw = raw
	k.ring.Store(&r)
	if k.log != nil {
		k.log.Info("master key ring reloaded", "file", filepath.Base(k.path), "why", why, "current", r.Current().ID, "keys", len(r.Keys))
	}
	return true, nil
}

// Watch reloads every interval until ctx ends, logging each new ring
// (also those a request's unknown key id made it read) and each new
// problem with the file once.
func (k *Keyring) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if k.path == "" {
		return
	}
	k.mu.Lock()
	k.log = log
	k.mu.Unlock()
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := k.reload("the file changed")
		if err != nil && err.Error() != lastErr {
			log.Error("reload master key ring", "err", err)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
	}
}

// Purpose returns purpose's view of the ring: each master key's derived
// key under the same id.
func (k *Keyring) Purpose(purpose string) *Purpose { return &Purpose{k: k, purpose: purpose} }

// Purpose is a secret.KeySource of one purpose's keys; it follows the
// ring's reloads.
type Purpose struct {
	k       *Keyring
	purpose string
	cache   atomic.Pointer[derived]
}

type derived struct {
	from    *Ring
	current string
	byID    map[string][]byte
}

var _ secret.KeySource = (*Purpose)(nil)

func (p *Purpose) keys() *derived {
	r := p.k.ring.Load()
	if d := p.cache.Load(); d != nil && d.from == r {
		return d
	}
	d := &derived{from: r, current: r.Keys[0].ID, byID: make(map[string][]byte, len(r.Keys))}
	for _, key := range r.Keys {
		d.byID[key.ID] = secret.Derive(key.Secret, p.purpose)
	}
	p.cache.Store(d)
	return d
}

// IDs are the ring's key ids, the current one first.
func (p *Purpose) IDs() []string {
	r := p.k.ring.Load()
	ids := make([]string, len(r.Keys))
	for i, key := range r.Keys {
		ids[i] = key.ID
	}
	return ids
}

// Current is the current key's id and derived key.
func (p *Purpose) Current() (string, []byte) {
	d := p.keys()
	return d.current, d.byID[d.current]
}

// Key is the derived key of master key id. An id the ring lacks makes the
// ring re-read its file first: the id may come from a node that has seen
// a rotation this one has not yet.
func (p *Purpose) Key(id string) ([]byte, bool) {
	if key, ok := p.keys().byID[id]; ok {
		return key, true
	}
	if changed, _ := p.k.reload("a token or sealed value named a key this node lacked"); !changed {
		return nil, false
	}
	key, ok := p.keys().byID[id]
	return key, ok
}
