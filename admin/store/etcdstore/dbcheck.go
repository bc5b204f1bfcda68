package etcdstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// A damaged database crashes the process that opens it, naming no file:
// etcd maps it (bbolt), so a page past the end of a file cut short is a
// SIGBUS, and what bbolt finds wrong as it loads the pages (it walks every
// bucket's tree when it opens the file for writing) or etcd as it reads
// the keys back is a Go panic in one of their goroutines. StartEmbedded
// reads the file first, with plain reads, and refuses it with a
// DamagedError.

// DamagedError is an embedded etcd's database that StartEmbedded found
// damaged before etcd opened it.
type DamagedError struct {
	Path string // the database file
	Err  error  // what is wrong with it
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("embedded etcd: database %s is damaged: %v", e.Path, e.Err)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// dbPath is the database's path in an etcd data directory.
func dbPath(dir string) string { return filepath.Join(dir, "member", "snap", "db") }

// The bbolt file format (version 2), as far as checkDB reads it: pages of
// pageSize bytes, each a 16-byte header (id u64, flags u16, count u16,
// overflow u32) then its content; pages 0 and 1 hold the meta, the
// others the buckets' B+trees, whose elements are 16 bytes each and point
// at their key (and value) relative to the element's own offset. The
// structures are the machine's own (native byte order).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	elementSize      = 16
	bucketHeaderSize = 16 // a bucket's value: root page id u64, sequence u64, then its page if the root is 0 (inline)
	metaSize         = 64 // magic, version, page size, flags u32; root bucket; freelist, page count, txid, checksum u64
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	noFreelist       = ^uint64(0)
)

var ne = binary.NativeEndian

// boltMeta is the part of a meta page checkDB uses.
type boltMeta struct {
	pageSize       uint64
	root, freelist uint64
	pages          uint64 // the high water mark: pages below it are in use
	txid           uint64
}

// readMeta decodes and checks the meta of the page at off (bbolt's
// Validate: magic, version, checksum).
func readMeta(f *os.File, off int64) (boltMeta, error) {
	b := make([]byte, metaSize)
	if _, err := f.ReadAt(b, off+pageHeaderSize); err != nil {
		return boltMeta{}, err
	}
	switch {
	case ne.Uint32(b[0:]) != boltMagic:
		return boltMeta{}, errors.New("not a bbolt database (magic)")
	case ne.Uint32(b[4:]) != boltVersion:
		return boltMeta{}, fmt.Errorf("bbolt version %d, want %d", ne.Uint32(b[4:]), boltVersion)
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != ne.Uint64(b[56:]) {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	return boltMeta{pageSize: uint64(ne.Uint32(b[8:])), root: ne.Uint64(b[16:]), freelist: ne.Uint64(b[32:]),
		pages: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}, nil
}

// checkDB checks the database of the etcd data directory dir, if it has
// one and it is not empty (etcd then fills a new one from its log), as far
// as opening it reads it: a meta page valid (the newer of the
// two, as bbolt picks), the file as long as the pages it counts, the
// freelist page if there is one, and every bucket's tree: each page within
// the file, of the id and type expected, referenced once, its elements,
// keys and values within it, its keys in the order bbolt checks; and
// every value of etcd's "key" bucket a key-value etcd can decode. Nothing
// is mapped: a file cut short or garbage is an error, not a fault.
//
// A database that another process holds (a node on the same data
// directory) is not read: that is an error, not a DamagedError.
func checkDB(dir string) error {
	path := dbPath(dir)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	defer f.Close()
	// bbolt holds an exclusive lock while it has the file open.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("embedded etcd: database %s: %w (in use by another process?)", path, err)
	}
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	c := &dbChecker{f: f, size: uint64(info.Size()), seen: map[uint64]bool{}}
	if err := c.check(); err != nil {
		return &DamagedError{Path: path, Err: err}
	}
	return nil
}

type dbChecker struct {
	f    *os.File
	size uint64
	meta boltMeta
	seen map[uint64]bool // the pages of the trees walked so far
}

func (c *dbChecker) check() error {
	if c.size == 0 {
		return nil // bbolt makes it a new database, which etcd fills from its log
	}
	m0, err0 := readMeta(c.f, 0)
	if err0 != nil {
		// bbolt then finds the page size in the second meta page: try
		// the offsets it would.
		for i := range 15 {
			if m, err := readMeta(c.f, 1024<<i); err == nil {
				m0.pageSize = m.pageSize
				break
			}
		}
	}
	ps := m0.pageSize
	if ps < pageHeaderSize+metaSize {
		return fmt.Errorf("no valid meta page (%v)", err0)
	}
	if c.size < 2*ps {
		return fmt.Errorf("the file is %d bytes, shorter than its two meta pages of %d", c.size, ps)
	}
	m1, err1 := readMeta(c.f, int64(ps))
	switch {
	case err0 != nil && err1 != nil:
		return fmt.Errorf("both meta pages are invalid: %v; %v", err0, err1)
	case err0 != nil || err1 == nil && m1.txid > m0.txid:
		c.meta = m1
	default:
		c.meta = m0
	}
	c.meta.pageSize = ps
	if pages := c.meta.pages; pages > c.size/ps {
		return fmt.Errorf("the file is %d bytes, cut short: its meta page counts %d pages of %d bytes (%d bytes)", c.size, pages, ps, pages*ps)
	}
	if fl := c.meta.freelist; fl != noFreelist {
		if err := c.checkFreelist(fl); err != nil {
			return err
		}
	}
	return c.checkBucket(c.meta.root, nil, nil)
}

// page reads the page id and its overflow pages, checking its header:
// its id, one of the flags in want, and that it lies in the file.
func (c *dbChecker) page(id uint64, want ...uint16) ([]byte, error) {
	ps := c.meta.pageSize
	if id < 2 || id > c.meta.pages || id >= c.size/ps {
		return nil, fmt.Errorf("page %d: out of bounds (%d pages in use, %d in the file)", id, c.meta.pages, c.size/ps)
	}
	h := make([]byte, pageHeaderSize)
	if _, err := c.f.ReadAt(h, int64(id*ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := ne.Uint64(h); got != id {
		return nil, fmt.Errorf("page %d: its header says page %d", id, got)
	}
	flags, overflow := ne.Uint16(h[8:]), uint64(ne.Uint32(h[12:]))
	ok := false
	for _, w := range want {
		ok = ok || flags == w
	}
	if !ok {
		return nil, fmt.Errorf("page %d: unexpected type %#x", id, flags)
	}
	if id+overflow >= c.size/ps {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the end of the file", id, overflow)
	}
	b := make([]byte, (1+overflow)*ps)
	if _, err := c.f.ReadAt(b, int64(id*ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return b, nil
}

func (c *dbChecker) checkFreelist(id uint64) error {
	p, err := c.page(id, freelistPageFlag)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	n, off := uint64(ne.Uint16(p[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF { // the count is the first id's place
		n, off = ne.Uint64(p[pageHeaderSize:]), off+8
	}
	if n > (uint64(len(p))-off)/8 {
		return fmt.Errorf("freelist page %d: %d ids do not fit in it", id, n)
	}
	return nil
}

// element returns the key and value (nil for a branch) of element i of
// the page p, checking they lie in it.
func element(p []byte, i int, leaf bool) (flags uint32, key, value []byte, child uint64, err error) {
	at := pageHeaderSize + i*elementSize
	if at+elementSize > len(p) {
		return 0, nil, nil, 0, fmt.Errorf("element %d past the page's end", i)
	}
	e := p[at : at+elementSize]
	var pos, ksize, vsize uint64
	if leaf {
		flags, pos, ksize, vsize = ne.Uint32(e), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
	} else {
		pos, ksize, child = uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
	}
	if end := uint64(at) + pos + ksize + vsize; end > uint64(len(p)) {
		return 0, nil, nil, 0, fmt.Errorf("element %d runs past the page's end", i)
	}
	k := uint64(at) + pos
	return flags, p[k : k+ksize], p[k+ksize : k+ksize+vsize], child, nil
}

// checkBucket walks the tree of a bucket: from its root page, or the
// inline page of its value. name is the bucket's key in its parent (nil
// for the root bucket).
func (c *dbChecker) checkBucket(root uint64, inline, name []byte) error {
	if root == 0 {
		// An inline bucket is read as the cursor reads it, bbolt's walk
		// passes over it: check that its elements lie in it.
		if len(inline) < pageHeaderSize || ne.Uint16(inline[8:]) != leafPageFlag {
			return fmt.Errorf("bucket %q: inline page not a leaf", name)
		}
		for i := range int(ne.Uint16(inline[10:])) {
			if _, _, _, _, err := element(inline, i, true); err != nil {
				return fmt.Errorf("bucket %q: inline page: %w", name, err)
			}
		}
		return nil
	}
	_, err := c.checkPage(root, nil, nil, name)
	return err
}

// checkPage walks the subtree of page id, whose keys the parent bounds to
// [lo, hi) (nil: no bound), as bbolt's check orders them, and returns its
// last key (nil for none).
func (c *dbChecker) checkPage(id uint64, lo, hi, bucket []byte) (last []byte, err error) {
	p, err := c.page(id, branchPageFlag, leafPageFlag)
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", bucket, err)
	}
	ps := c.meta.pageSize
	for i := range uint64(len(p)) / ps {
		if c.seen[id+i] {
			return nil, fmt.Errorf("bucket %q: page %d referenced twice", bucket, id+i)
		}
		c.seen[id+i] = true
	}
	leaf := ne.Uint16(p[8:]) == leafPageFlag
	n := int(ne.Uint16(p[10:]))
	prev := lo // the key before: the parent's bound, then the last of each element
	for i := range n {
		flags, key, value, child, err := element(p, i, leaf)
		if err == nil {
			err = keyOrder(key, prev, hi, i)
		}
		if err != nil {
			return nil, fmt.Errorf("bucket %q: page %d: %w", bucket, id, err)
		}
		if !leaf {
			next := hi
			if i < n-1 {
				if _, next, _, _, err = element(p, i+1, false); err != nil {
					return nil, fmt.Errorf("bucket %q: page %d: %w", bucket, id, err)
				}
			}
			if last, err = c.checkPage(child, key, next, bucket); err != nil {
				return nil, err
			}
			prev = last
			continue
		}
		prev, last = key, key
		switch {
		case flags&bucketLeafFlag != 0:
			if len(value) < bucketHeaderSize {
				return nil, fmt.Errorf("bucket %q: page %d: bucket %q's value is %d bytes", bucket, id, key, len(value))
			}
			if err := c.checkBucket(ne.Uint64(value), value[bucketHeaderSize:], key); err != nil {
				return nil, err
			}
		case bucket != nil && string(bucket) == "key":
			// etcd's keys, which it decodes as it starts.
			if err := proto.Unmarshal(value, &mvccpb.KeyValue{}); err != nil {
				return nil, fmt.Errorf("bucket %q: page %d: the value of %x: %w", bucket, id, key, err)
			}
		}
	}
	return last, nil
}

// keyOrder is bbolt's check of a page's key at index i against the key
// before it (the bound of the parent for the first) and the parent's
// bound after it.
func keyOrder(key, prev, hi []byte, i int) error {
	switch c := bytes.Compare(prev, key); {
	case i == 0 && prev != nil && c > 0:
		return fmt.Errorf("key %d (%x) is below its parent's (%x)", i, key, prev)
	case i > 0 && c >= 0:
		return fmt.Errorf("key %d (%x) is not above the one before it (%x)", i, key, prev)
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		return fmt.Errorf("key %d (%x) is not below the next key of its parent (%x)", i, key, hi)
	}
	return nil
}
