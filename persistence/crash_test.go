package persistence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// TestKill9_AppendLoop_ReopensWithOnlyWholeCommits kills a process that commits in a
// tight loop from several goroutines, at a random moment, a few times over the same
// data dir, and proves after each kill that the store reopens (full validation), that
// every stream's seqs are contiguous from 1, that every commit landed whole across
// its writer stream, the shared stream and the outbox — or not at all — and that
// every commit the process reported as done survived.
func TestKill9_AppendLoop_ReopensWithOnlyWholeCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary and kills it")
	}
	dir := t.TempDir()
	// The store exists before the first kill, so each round resumes it.
	s, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	acked := make([]int, crashWriters) // highest commit each writer reported, across rounds
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const rounds = 4
	for round := 1; round <= rounds; round++ {
		threshold := 300 + r.IntN(600)
		n := runAndKill(t, dir, threshold, r, acked)
		t.Logf("round %d: killed after %d acknowledged commits (threshold %d)", round, n, threshold)
		verifyCrashStore(t, dir, acked)
	}
}

// runAndKill starts the append-loop helper, waits for threshold acknowledged commits
// plus a random few milliseconds, SIGKILLs it, and records every acknowledgement it
// printed (including those still in the pipe). It returns the round's ack count.
func runAndKill(t *testing.T, dir string, threshold int, r *rand.Rand, acked []int) int {
	t.Helper()
	cmd := helperCmd(t, "append-loop", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	count := 0
	record := func(line string) {
		var w, k int
		if _, err := fmt.Sscanf(line, "ok %d %d", &w, &k); err != nil {
			t.Fatalf("helper printed %q", line)
		}
		if k > acked[w] {
			acked[w] = k
		}
		count++
	}
	killed := false
	timeout := time.After(5 * time.Minute)
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("helper exited before the kill: %s", stderr.String())
			}
			record(line)
			if count >= threshold {
				// A random moment past the threshold, mid-commit as often as not.
				time.Sleep(time.Duration(r.IntN(5000)) * time.Microsecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		case <-timeout:
			_ = cmd.Process.Kill()
			t.Fatalf("only %d commits in 5 minutes; stderr: %s", count, stderr.String())
		}
	}
	for line := range lines {
		record(line)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die of SIGKILL: %v; stderr: %s", err, stderr.String())
	}
	return count
}

// verifyCrashStore reopens dir and checks the whole-commit invariants.
func verifyCrashStore(t *testing.T, dir string, acked []int) {
	t.Helper()
	s, info, err := Open(Options{Dir: dir, ProductionMode: true})
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer s.Close()
	if info.Initialized {
		t.Fatal("reopen initialised a new store")
	}
	landed := make([]int, crashWriters) // commits per writer found in its stream
	for w := 0; w < crashWriters; w++ {
		l, err := s.Load(crashStream(w))
		if err != nil {
			t.Fatalf("Load %s: %v", crashStream(w), err)
		}
		k, i := 1, 0 // expecting part i of commit k
		for idx, rec := range l.Events {
			if rec.Seq != uint64(idx+1) {
				t.Fatalf("%s: event %d has seq %d", crashStream(w), idx, rec.Seq)
			}
			var p crashPart
			if err := json.Unmarshal(rec.Data, &p); err != nil {
				t.Fatalf("%s seq %d: %v", crashStream(w), rec.Seq, err)
			}
			if p.W != w || p.K != k || p.I != i || p.N != 1+k%4 {
				t.Fatalf("%s seq %d = %+v, want commit %d part %d of %d", crashStream(w), rec.Seq, p, k, i, 1+k%4)
			}
			if i++; i == p.N {
				k, i = k+1, 0
			}
		}
		if i != 0 {
			t.Fatalf("%s: commit %d landed only %d of %d parts", crashStream(w), k, i, 1+k%4)
		}
		landed[w] = k - 1
		if landed[w] < acked[w] {
			t.Fatalf("%s: commit %d was acknowledged but only %d landed", crashStream(w), acked[w], landed[w])
		}
	}

	// The shared stream holds exactly one part per landed commit, each writer in order.
	shared, err := s.Load(crashSharedStream)
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, crashWriters)
	for idx, rec := range shared.Events {
		if rec.Seq != uint64(idx+1) {
			t.Fatalf("shared: event %d has seq %d", idx, rec.Seq)
		}
		var p crashPart
		if err := json.Unmarshal(rec.Data, &p); err != nil {
			t.Fatal(err)
		}
		if next[p.W]++; p.K != next[p.W] {
			t.Fatalf("shared seq %d = writer %d commit %d, want commit %d", rec.Seq, p.W, p.K, next[p.W])
		}
	}
	// The outbox holds exactly one row per landed commit, FIFO per lease.
	rows, err := s.OutboxAll()
	if err != nil {
		t.Fatal(err)
	}
	fromOutbox := make([]int, crashWriters)
	for _, e := range rows {
		var w, k int
		if _, err := fmt.Sscanf(e.Row.DeliveryID, "%d-%d", &w, &k); err != nil || e.Row.Lease != crashLease(w) {
			t.Fatalf("outbox row %+v", e)
		}
		if fromOutbox[w]++; k != fromOutbox[w] {
			t.Fatalf("outbox for writer %d: row %d is commit %d", w, fromOutbox[w], k)
		}
	}
	for w := 0; w < crashWriters; w++ {
		if next[w] != landed[w] || fromOutbox[w] != landed[w] {
			t.Fatalf("writer %d: %d commits in its stream, %d in shared, %d in outbox: a commit landed partially",
				w, landed[w], next[w], fromOutbox[w])
		}
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check after reopen: %v", err)
	}
}
