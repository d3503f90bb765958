package store

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// bloom is a Bloom filter that grows: it answers "certainly not added" or
// "perhaps added", never "not added" for a key that was. When its newest
// layer has taken as many keys as it was sized for, a layer for twice as
// many is started, and a key is looked for in every layer. Each layer sets
// one bit more a key than the one before it, which halves its false
// positives, so that all layers together have at most twice the first's
// (Almeida et al., "Scalable Bloom Filters", 2007). Once another layer
// would take it past maxBits in all, it stops growing and its newest layer
// takes on more keys: "perhaps" grows commoner, the memory does not. Adds
// and lookups run concurrently without a lock (each bit is set with an
// atomic OR).
//
// Keys are hashed with a seed drawn at start, so that nobody outside can
// choose keys that collide and fill it.
type bloom struct {
	seed    maphash.Seed
	maxBits uint64
	grow    sync.Mutex // held to start a layer
	layers  atomic.Pointer[[]*bloomLayer]
	capped  atomic.Bool // grown to maxBits: adds no longer take grow
}

type bloomLayer struct {
	bits   []uint64
	nbits  uint64
	hashes uint64 // bits set a key
	keys   int64  // what it is sized for
	added  atomic.Int64
}

const (
	// firstBloomHashes gives the first layer about 0.8 % false positives
	// when full (bloomLayerBits).
	firstBloomHashes = 7
	// maxBloomBits bounds all layers together: 64 MiB, about 50 million
	// keys in the first layer.
	maxBloomBits = 1 << 29
)

func newBloom(keys int64) *bloom {
	return newBoundedBloom(keys, maxBloomBits)
}

func newBoundedBloom(keys int64, maxBits uint64) *bloom {
	f := &bloom{seed: maphash.MakeSeed(), maxBits: maxBits}
	// Asked for more than the bound holds, the first layer takes the bound
	// and more keys than it was sized for.
	fits := int64(maxBits * 1000 / (firstBloomHashes * 1443))
	layers := []*bloomLayer{newBloomLayer(min(max(keys, 1<<10), fits), firstBloomHashes)}
	f.layers.Store(&layers)
	return f
}

func newBloomLayer(keys int64, hashes uint64) *bloomLayer {
	nbits := bloomLayerBits(keys, hashes)
	return &bloomLayer{bits: make([]uint64, (nbits+63)/64), nbits: nbits, hashes: hashes, keys: keys}
}

// bloomLayerBits sizes a layer at 1/ln 2 (1.443) bits a key for each bit
// it sets, which gives it 2^-hashes false positives when full.
func bloomLayerBits(keys int64, hashes uint64) uint64 {
	return uint64(keys) * hashes * 1443 / 1000
}

func (f *bloom) add(key string) {
	h := maphash.String(f.seed, key)
	layers := *f.layers.Load()
	l := layers[len(layers)-1]
	if l.added.Add(1) > l.keys && !f.capped.Load() {
		l = f.newest(l)
	}
	for i := range l.hashes {
		b := bloomBit(h, i, l.nbits)
		atomic.OrUint64(&l.bits[b/64], 1<<(b%64))
	}
}

// newest returns the layer to add to once full has taken its keys: a new
// one for twice as many keys, unless another add started it already or
// the bound is reached.
func (f *bloom) newest(full *bloomLayer) *bloomLayer {
	f.grow.Lock()
	defer f.grow.Unlock()
	layers := *f.layers.Load()
	last := layers[len(layers)-1]
	if last != full {
		last.added.Add(1)
		return last
	}
	var total uint64
	for _, l := range layers {
		total += l.nbits
	}
	if total+bloomLayerBits(2*full.keys, full.hashes+1) > f.maxBits {
		f.capped.Store(true)
		return full
	}
	next := newBloomLayer(2*full.keys, full.hashes+1)
	next.added.Store(1)
	grown := append(append([]*bloomLayer(nil), layers...), next)
	f.layers.Store(&grown)
	return next
}

// mayContain reports false only for a key never added.
func (f *bloom) mayContain(key string) bool {
	h := maphash.String(f.seed, key)
	for _, l := range *f.layers.Load() {
		if l.has(h) {
			return true
		}
	}
	return false
}

func (l *bloomLayer) has(h uint64) bool {
	for i := range l.hashes {
		b := bloomBit(h, i, l.nbits)
		if atomic.LoadUint64(&l.bits[b/64])&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// bloomBit is a key's i-th bit of nbits, from one 64-bit hash split in two
// (Kirsch and Mitzenmacher: two hashes make as good a filter as k).
func bloomBit(h, i, nbits uint64) uint64 {
	lo, hi := h&0xffffffff, h>>32|1
	return (lo + i*hi) % nbits
}

// bytes is the filter's memory, for its size in metrics and tests.
func (f *bloom) bytes() int64 {
	var n int64
	for _, l := range *f.layers.Load() {
		n += int64(len(l.bits)) * 8
	}
	return n
}
