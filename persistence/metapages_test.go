package persistence

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// testMeta reads a meta page's page size and txid at the offsets bbolt v1.4.3 uses
// (16-byte page header; pageSize at +8, txid at +48, checksum at +56 of the meta),
// independently of the code under test.
func testMeta(t *testing.T, data []byte, page int) (pageSize int, txid uint64) {
	t.Helper()
	ps := int(binary.NativeEndian.Uint32(data[16+8:]))
	off := page * ps
	return int(binary.NativeEndian.Uint32(data[off+16+8:])), binary.NativeEndian.Uint64(data[off+16+48:])
}

// dirWithLastCommit builds a populated store plus one last, recognisable commit and
// returns its dir, the newest meta page and the txids of the newest and older meta.
func dirWithLastCommit(t *testing.T) (dir string, newest int, newTx, oldTx uint64) {
	t.Helper()
	dir = populatedDir(t)
	s, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/last", Events: []Event{ev("Last", 1)}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(statePathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, tx0 := testMeta(t, data, 0)
	_, tx1 := testMeta(t, data, 1)
	if tx0 > tx1 {
		return dir, 0, tx0, tx1
	}
	return dir, 1, tx1, tx0
}

// corruptMetaChecksum flips a byte of one meta page's checksum field.
func corruptMetaChecksum(t *testing.T, dir string, page int) {
	t.Helper()
	data, err := os.ReadFile(statePathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := testMeta(t, data, 0)
	data[page*ps+16+56] ^= 0xff
	if err := os.WriteFile(statePathOf(dir), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReadMetaPages_CleanFile_BothValidAdjacentTxids(t *testing.T) {
	// Proves the layout matches the pinned bbolt: a wrong offset or checksum range
	// would make both pages look invalid, which the open path treats as "bbolt's
	// problem" and would hide.
	dir, newest, newTx, oldTx := dirWithLastCommit(t)
	m0, m1, found, _, err := readMetaPages(statePathOf(dir), "state.db", 0)
	if err != nil || !found {
		t.Fatalf("readMetaPages: found=%v err=%v", found, err)
	}
	if !m0.valid() || !m1.valid() {
		t.Fatalf("clean file: page 0 %+v, page 1 %+v", m0, m1)
	}
	if int(m0.pageSize) != os.Getpagesize() || m0.pageSize != m1.pageSize {
		t.Fatalf("page sizes %d, %d", m0.pageSize, m1.pageSize)
	}
	got := map[int]uint64{0: m0.txid, 1: m1.txid}
	if got[newest] != newTx || got[1-newest] != oldTx || newTx != oldTx+1 || newTx%2 != uint64(newest) {
		t.Fatalf("txids %v, want newest page %d at %d and the other at %d", got, newest, newTx, oldTx)
	}
}

func TestOpen_UncorruptedStateDB_ReportsNoFindings(t *testing.T) {
	dir, _, _, _ := dirWithLastCommit(t)
	s, info := openOK(t, Options{Dir: dir})
	if info.MetaFallback != "" || len(info.Findings) != 0 || len(s.Findings()) != 0 {
		t.Fatalf("clean store: fallback %q, findings %v / %v", info.MetaFallback, info.Findings, s.Findings())
	}
}

func TestOpen_NewestMetaPageChecksumCorrupt_OpensPreviousTransactionAndReportsFallback(t *testing.T) {
	dir, newest, newTx, oldTx := dirWithLastCommit(t)
	corruptMetaChecksum(t, dir, newest)

	s, info, err := Open(Options{Dir: dir, ProductionMode: true})
	if err != nil {
		t.Fatalf("Open after corrupting the newest meta page: %v", err)
	}
	defer s.Close()
	// bbolt really did open the previous transaction: the last commit is gone.
	l, err := s.Load("lease/last")
	if err != nil || len(l.Events) != 0 {
		t.Fatalf("lease/last after fallback: %d events, %v; want the last commit dropped", len(l.Events), err)
	}
	if l, err := s.Load("lease/019"); err != nil || len(l.Events) == 0 {
		t.Fatalf("earlier commits: %d events, %v", len(l.Events), err)
	}
	for _, want := range []string{statePathOf(dir), fmt.Sprintf("page %d, txid %d", newest, newTx), fmt.Sprintf("txid %d, page %d", oldTx, 1-newest), "checksum", "dropped"} {
		if !strings.Contains(info.MetaFallback, want) {
			t.Errorf("MetaFallback %q lacks %q", info.MetaFallback, want)
		}
	}
	if strings.ContainsAny(info.MetaFallback, "\r\n") {
		t.Error("MetaFallback is not one line")
	}
	if f := s.Findings(); len(f) != 1 || f[0] != info.MetaFallback || len(info.Findings) != 1 || info.Findings[0] != info.MetaFallback {
		t.Fatalf("Findings: store %v, info %v", f, info.Findings)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v (a fallback is a finding, not a refusal)", err)
	}

	// The evidence lives only in the file until the next commit rewrites that page:
	// the finding is reported by the open that saw it, not by later ones.
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/after", Events: []Event{ev("After", 1)}}}}); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, s)
	if len(s2.Findings()) != 0 {
		t.Fatalf("findings after the bad page was rewritten: %v", s2.Findings())
	}
}

func TestOpen_OlderMetaPageCorrupt_NothingDroppedDamageReported(t *testing.T) {
	dir, newest, newTx, oldTx := dirWithLastCommit(t)
	corruptMetaChecksum(t, dir, 1-newest)
	s, info := openOK(t, Options{Dir: dir})
	if l, err := s.Load("lease/last"); err != nil || len(l.Events) != 1 {
		t.Fatalf("lease/last: %d events, %v; want the newest commit kept", len(l.Events), err)
	}
	if info.MetaFallback != "" {
		t.Fatalf("MetaFallback %q for a damaged older page", info.MetaFallback)
	}
	f := s.Findings()
	if len(f) != 1 || !strings.Contains(f[0], fmt.Sprintf("older meta page (page %d, txid %d)", 1-newest, oldTx)) || !strings.Contains(f[0], fmt.Sprintf("txid %d", newTx)) || !strings.Contains(f[0], "nothing was dropped") {
		t.Fatalf("findings %v", f)
	}
}

func TestJudgeMetaPages_InvalidPageWithUnrelatedTxid_TreatedAsPossibleFallback(t *testing.T) {
	// A zeroed or scrambled page: its txid field says nothing reliable.
	good := metaPage{page: 0, txid: 40, pageSize: 4096}
	bad := metaPage{page: 1, txid: 7, invalid: "bad magic 0x00000000"}
	fb, findings := judgeMetaPages("/x/state.db", good, bad)
	if fb == "" || len(findings) != 1 || !strings.Contains(fb, "may have been dropped") {
		t.Fatalf("fallback %q findings %v", fb, findings)
	}
	if fb, f := judgeMetaPages("/x/state.db", good, metaPage{page: 1, txid: 39}); fb != "" || f != nil {
		t.Fatalf("two valid pages: %q %v", fb, f)
	}
}

func TestOpen_RefusedStoreWithMetaFallback_RefusalNamesTheFallback(t *testing.T) {
	// The dropped commit was the one that bound the marker's identity: the open is
	// refused as foreign, and the refusal says why that may be.
	dir, newest, _, _ := dirWithLastCommit(t)
	corruptMetaChecksum(t, dir, newest)
	m, err := readMarker(markerPathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	other := m
	other.InstallationID = "6f1c6b1e-3f0a-4c55-9d5e-2b7a3c1d9e10"
	raw, _ := json.Marshal(other)
	if err := os.WriteFile(markerPathOf(dir), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrForeign, "belong to different installations", "; also: state.db "+statePathOf(dir)+": the newest meta page")
}
