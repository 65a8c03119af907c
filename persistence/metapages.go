package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt keeps two meta pages (page 0 and 1; a commit with txid t writes page t%2) and
// opens on the one with the higher txid that validates, silently falling back to the
// other when the newest fails its checksum: the last committed transaction is dropped
// without a word. inspectMetaPages reads both pages itself, read-only and before
// anything is written (the first commit after open overwrites the bad page, and the
// evidence with it), and says so.
//
// The layout, from go.etcd.io/bbolt v1.4.3 internal/common (page.go, meta.go), in
// the host's byte order: a 16-byte page header (id u64, flags u16, count u16,
// overflow u32), then the meta: magic u32, version u32, pageSize u32, flags u32,
// root bucket {root pgid u64, sequence u64}, freelist pgid u64, high-water pgid u64,
// txid u64, checksum u64 = FNV-1a 64 over the 56 meta bytes before it. Meta.Validate
// checks magic, version and checksum, nothing else.
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeaderSize = 16
	boltMetaSize       = 64
	boltMetaSumOffset  = 56
	boltMetaTxidOffset = 48
	boltMinPageSize    = 1024
	boltMaxPageSize    = 1024 << 14 // bbolt probes no further for the second meta
	metaReadBytes      = 0x1000     // what bbolt reads to find the page size
)

// metaPage is one decoded meta page.
type metaPage struct {
	page     int
	pageSize uint32
	txid     uint64
	invalid  string // why Validate would fail; "" when it passes
}

func (m metaPage) valid() bool { return m.invalid == "" }

// parseMeta decodes the meta in buf (a page from its first byte) the way bbolt's
// Meta.Validate judges it.
func parseMeta(page int, buf []byte) metaPage {
	if len(buf) < boltPageHeaderSize+boltMetaSize {
		return metaPage{page: page, invalid: "page is cut short"}
	}
	meta := buf[boltPageHeaderSize : boltPageHeaderSize+boltMetaSize]
	ne := binary.NativeEndian
	m := metaPage{page: page, pageSize: ne.Uint32(meta[8:12]), txid: ne.Uint64(meta[boltMetaTxidOffset:])}
	h := fnv.New64a()
	_, _ = h.Write(meta[:boltMetaSumOffset])
	switch magic, version, sum := ne.Uint32(meta[0:4]), ne.Uint32(meta[4:8]), ne.Uint64(meta[boltMetaSumOffset:]); {
	case magic != boltMagic:
		m.invalid = fmt.Sprintf("bad magic %#08x", magic)
	case version != boltVersion:
		m.invalid = fmt.Sprintf("format version %d, want %d", version, boltVersion)
	case sum != h.Sum64():
		m.invalid = fmt.Sprintf("checksum %016x, computed %016x", sum, h.Sum64())
	}
	return m
}

func validPageSize(ps uint32) bool {
	return ps >= boltMinPageSize && ps <= boltMaxPageSize && ps&(ps-1) == 0
}

// readMetaPages reads both meta pages of the bbolt file at path through a no-follow,
// read-only descriptor with the usual shape checks (so a file refused for its shape
// is refused with the same message inspectBolt would give). found is false when the
// page size cannot be learnt from a valid meta — both pages are bad, which bbolt
// refuses on its own.
func readMetaPages(path, what string, ceiling int64) (m0, m1 metaPage, found bool, fid fileID, err error) {
	f, fid, size, err := openChecked(path, what, ceiling)
	if err != nil {
		return m0, m1, false, fileID{}, err
	}
	defer f.Close()
	read := pageReader(f, what+" "+path)
	buf, err := read(0)
	if err != nil {
		return m0, m1, false, fileID{}, err
	}
	m0 = parseMeta(0, buf)
	ps, err := findPageSize(m0, size, read)
	if err != nil {
		return m0, m1, false, fileID{}, err
	}
	if ps == 0 || size < 2*ps {
		return m0, m1, false, fid, nil
	}
	if buf, err = read(ps); err != nil {
		return m0, m1, false, fileID{}, err
	}
	m1 = parseMeta(1, buf)
	return m0, m1, true, fid, nil
}

// pageReader reads up to metaReadBytes of f at an offset (less at its end); name
// is f as its errors call it.
func pageReader(f *os.File, name string) func(off int64) ([]byte, error) {
	return func(off int64) ([]byte, error) {
		buf := make([]byte, metaReadBytes)
		n, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s at %d: %w", name, off, err)
		}
		return buf[:n], nil
	}
}

// findPageSize is the page size of a bbolt file of size bytes whose page 0 decodes
// to m0: its own when valid, else the one at which a valid page-1 meta sits (bbolt's
// probe, accepting only a meta that says that very size). 0 when neither tells.
func findPageSize(m0 metaPage, size int64, read func(off int64) ([]byte, error)) (int64, error) {
	if m0.valid() && validPageSize(m0.pageSize) {
		return int64(m0.pageSize), nil
	}
	for p := int64(boltMinPageSize); p <= boltMaxPageSize && p < size-boltMinPageSize; p <<= 1 {
		buf, err := read(p)
		if err != nil {
			return 0, err
		}
		if m := parseMeta(1, buf); m.valid() && int64(m.pageSize) == p {
			return p, nil
		}
	}
	return 0, nil
}

// judgeMetaPages turns the two meta pages into findings. fallback is set when bbolt
// opens on a meta older than the newest one written, or may have: the invalid page
// claims a newer txid, or one that is not the valid page's predecessor.
func judgeMetaPages(path string, m0, m1 metaPage) (fallback string, findings []string) {
	if m0.valid() == m1.valid() {
		return "", nil // both fine, or both bad (bbolt refuses the file itself)
	}
	good, bad := m0, m1
	if !good.valid() {
		good, bad = m1, m0
	}
	switch {
	case bad.txid > good.txid:
		fallback = fmt.Sprintf("state.db %s: the newest meta page (page %d, txid %d) fails validation (%s), so bbolt silently opened the previous transaction (txid %d, page %d): the last committed transaction was dropped (a power loss during that commit, or damage to the file)",
			path, bad.page, bad.txid, bad.invalid, good.txid, good.page)
	case good.txid > 0 && bad.txid == good.txid-1:
		return "", []string{fmt.Sprintf("state.db %s: the older meta page (page %d, txid %d) fails validation (%s); bbolt opened the newest transaction (txid %d, page %d), nothing was dropped and the next commit rewrites that page, but the file has taken damage",
			path, bad.page, bad.txid, bad.invalid, good.txid, good.page)}
	default:
		fallback = fmt.Sprintf("state.db %s: meta page %d fails validation (%s) and its txid field (%d) does not say whether it was older or newer than txid %d on the valid page %d; bbolt opened txid %d, and the last committed transaction may have been dropped",
			path, bad.page, bad.invalid, bad.txid, good.txid, good.page, good.txid)
	}
	return fallback, []string{fallback}
}

// inspectMetaPages reads and judges state.db's two meta pages. fid is the inode read
// (zero when the file was too short to judge).
func inspectMetaPages(path, what string, ceiling int64) (fallback string, findings []string, fid fileID, err error) {
	m0, m1, found, fid, err := readMetaPages(path, what, ceiling)
	if err != nil || !found {
		return "", nil, fid, err
	}
	fallback, findings = judgeMetaPages(path, m0, m1)
	return fallback, findings, fid, nil
}
