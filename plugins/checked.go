package plugins

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
)

// A configuration is checked once, where it enters the node: by the Admin
// API before it is stored, by the store's sync as it is read (etcd), or
// when the standalone file is loaded. Two things keep it from being
// checked again.
//
// Within a process, the registry remembers the configurations it passed
// (passed): a configuration the Admin API checked is not checked again
// when the store's watch brings it back, nor is one that a rebuild meets
// again. Only a configuration without references is remembered: whether
// one with a reference passes depends on the environment it resolves in.
//
// Across processes, a Spec whose every plugin configuration a registry
// checked carries that registry's Fingerprint (spec.Spec.Checked): a
// worker whose registry has the same fingerprint — the same build and
// executable file, so the same plugins, schemas and Check code — builds such a Spec's
// configurations without checking them again (BuildPhasesChecked,
// IndexConsumersChecked, IndexMetadataChecked with checked set). A
// configuration holding a reference is checked all the same, as it
// resolves in the worker: a worker taken over by a supervisor of another
// environment resolves it in its own.

// maxPassed bounds the configurations a registry remembers; past it the
// memory starts again (a bulk load of more configurations than this
// checks some of them twice, as before).
const maxPassed = 1 << 16

// passKey names one configuration checked: how (the configuration's
// schema, or the consumer's), of which plugin, and what was written.
func passKey(consumer bool, name string, raw json.RawMessage) [32]byte {
	h := sha256.New()
	if consumer {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(raw)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// memo is a registry's record of the configurations it passed. Safe for
// concurrent use.
type memo struct {
	mu     sync.Mutex
	passed map[[32]byte]struct{}
}

func (m *memo) has(k [32]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.passed[k]
	return ok
}

func (m *memo) add(k [32]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.passed == nil || len(m.passed) >= maxPassed {
		m.passed = make(map[[32]byte]struct{})
	}
	m.passed[k] = struct{}{}
}

// Fingerprint identifies what this registry's checks are: the build of
// the running program (its module versions and VCS revision, as
// runtime/debug reports them) and the registered plugins with their
// schemas. Two processes of one build registering the same plugins have
// the same fingerprint, so a configuration one checked, holding no
// reference, the other would pass too. Safe for concurrent use.
func (r *Registry) Fingerprint() [32]byte {
	r.mu.RLock()
	fp, ok := r.fp, r.fpSet
	r.mu.RUnlock()
	if ok {
		return fp
	}
	h := sha256.New()
	if bi, ok := debug.ReadBuildInfo(); ok {
		h.Write([]byte(bi.String()))
	}
	// And the executable file itself: a build with uncommitted changes
	// reports the revision it started from, so two builds of other checks
	// may report the same; two files (another inode, size or time) never
	// share a fingerprint. A worker runs its supervisor's file.
	if fi, err := os.Stat("/proc/self/exe"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			fmt.Fprintf(h, "\x00exe %d:%d %d %d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(r.impl)) {
		p := r.impl[name]
		h.Write([]byte{0})
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(p.Schema())
		if cp, ok := p.(ConsumerSchemaPlugin); ok {
			h.Write([]byte{1})
			h.Write(cp.ConsumerSchema())
		}
		if mp, ok := p.(MetadataSchemaPlugin); ok {
			h.Write([]byte{2})
			h.Write(mp.MetadataSchema())
		}
	}
	h.Sum(r.fp[:0])
	r.fpSet = true
	return r.fp
}

// Trusts reports whether a Spec whose mark is checked (spec.Spec.Checked)
// was checked by a registry of r's fingerprint, so that r may build its
// configurations without checking them again. The zero mark is trusted by
// none.
func (r *Registry) Trusts(checked [32]byte) bool {
	return checked != [32]byte{} && checked == r.Fingerprint()
}
