package storage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The crash test re-executes this test binary as a child process that writes
// rounds as fast as it can; the parent kills it with SIGKILL at varied points
// and checks that the reopened file satisfies the package invariants.
const (
	crashEnvDB     = "DPFL_STORAGE_CRASH_DB"
	crashEnvParent = "DPFL_STORAGE_CRASH_PARENT"
	crashJob       = "crash"
	// crashParams is the model size of the paper-scale CNN used in the
	// benchmarks, so each commit spans many pages and a kill can land inside
	// the page writes of a transaction.
	crashParams = 199_210
)

// TestCrashChild is the child half of TestCrashKill9; run directly it skips.
// Per round r it appends the write-ahead ledger entry, prints "ledger r",
// commits the round and prints "committed r". A printed line therefore
// means the corresponding transaction returned (was fsynced).
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnvDB)
	if path == "" {
		t.Skip("child process of TestCrashKill9")
	}
	parent, _ := strconv.Atoi(os.Getenv(crashEnvParent))
	die := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	db, err := Open(path)
	if err != nil {
		die(err)
	}
	if err := db.CreateJob(Job{ID: crashJob, State: StateRunning}); err != nil {
		die(err)
	}
	for r := 1; r < 1_000_000; r++ {
		if os.Getppid() != parent { // orphaned: the parent test died
			os.Exit(3)
		}
		if _, err := db.AppendLedger(crashJob, LedgerEntry{Round: r, Event: event(r)}); err != nil {
			die(err)
		}
		fmt.Printf("ledger %d\n", r)
		if err := db.CommitRound(crashJob, r, metricsFor(r), checkpointFor(r, crashParams)); err != nil {
			die(err)
		}
		fmt.Printf("committed %d\n", r)
	}
	die(errors.New("never killed"))
}

// progress is what the child has reported as durable so far, and when the
// parent read the latest "committed" line.
type progress struct {
	mu                sync.Mutex
	ledger, committed int
	at                time.Time
}

func (p *progress) get() (ledger, committed int, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ledger, p.committed, p.at
}

// crashKills is the number of kill points TestCrashKill9 tries.
const crashKills = 12

func TestCrashKill9(t *testing.T) {
	if os.Getenv(crashEnvDB) != "" {
		t.Skip("running as the child")
	}
	// Kill number i lands i/crashKills of a round period after a commit
	// was acknowledged. The period is measured on the running child, so
	// the kill points sweep one whole round (ledger transaction, checkpoint
	// encoding, commit transaction) whatever this machine's fsync speed.
	var between int // kills that left a write-ahead entry without its commit
	for i := range crashKills {
		frac := float64(i) / crashKills
		t.Run(fmt.Sprintf("phase%.2f", frac), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crash.db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnvDB+"="+path, crashEnvParent+"="+strconv.Itoa(os.Getpid()))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill() // on early test failure
			var p progress
			eof := make(chan struct{})
			go func() {
				defer close(eof)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					now := time.Now()
					var r int
					p.mu.Lock()
					if _, err := fmt.Sscanf(sc.Text(), "ledger %d", &r); err == nil {
						p.ledger = r
					} else if _, err := fmt.Sscanf(sc.Text(), "committed %d", &r); err == nil {
						p.committed, p.at = r, now
					}
					p.mu.Unlock()
				}
			}()
			// waitCommitted returns when the child has acknowledged commit n,
			// with the time its line was read.
			waitCommitted := func(n int) (int, time.Time) {
				for {
					if _, c, at := p.get(); c >= n {
						return c, at
					}
					select {
					case <-eof:
						cmd.Wait()
						t.Fatalf("child exited early: %s", stderr.String())
					case <-time.After(50 * time.Microsecond):
					}
				}
			}
			c, _ := waitCommitted(1)
			if i == 0 {
				// Another process holds the file: Open must say so.
				_, err := Open(path)
				wantErr(t, err, ErrLocked, "locked by another dpfl-server?")
				_, c, _ = p.get()
			}
			c0, t0 := waitCommitted(c + 1)
			c1, t1 := waitCommitted(c0 + 3)
			period := t1.Sub(t0) / time.Duration(c1-c0)
			_, at := waitCommitted(c1 + 1)
			time.Sleep(time.Until(at.Add(time.Duration(frac * float64(period)))))
			if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
				t.Fatal(err)
			}
			<-eof // lines written before death are still in the pipe
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != -1 {
				t.Fatalf("child exited with %d, not by the signal: %s", code, stderr.String())
			}
			ledger, committed, _ := p.get()
			if checkCrashInvariants(t, path, ledger, committed) {
				between++
			}
		})
	}
	t.Logf("%d of %d kills left a write-ahead ledger entry without its commit", between, crashKills)
}

// checkCrashInvariants reopens the store the killed child left and checks
// the invariants against what the child reported, then that the job can be
// resumed. It reports whether the kill fell between a round's ledger append
// and its commit.
func checkCrashInvariants(t *testing.T, path string, ledgerSeen, committedSeen int) (between bool) {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify after kill: %v", err)
	}
	j, err := db.Job(crashJob)
	if err != nil {
		t.Fatal(err)
	}
	R := j.Round
	// Durability: an acknowledged commit survives; at most the one in
	// flight when the signal arrived is extra.
	if R < committedSeen || R > committedSeen+1 {
		t.Fatalf("job at round %d, child had reported %d commits", R, committedSeen)
	}
	m, err := db.Metrics(crashJob)
	if err != nil || len(m) != R {
		t.Fatalf("%d metrics (%v) for round %d", len(m), err, R)
	}
	for i, x := range m {
		var v struct{ Round int }
		if json.Unmarshal(x, &v) != nil || v.Round != i+1 {
			t.Fatalf("metrics[%d] = %s", i, x)
		}
	}
	ck, ok, err := db.Checkpoint(crashJob)
	want := checkpointFor(R, crashParams)
	want.Round = R
	if err != nil || !ok || !equalCheckpoint(ck, want) {
		t.Fatalf("checkpoint ok=%v err=%v round %d, want round %d content", ok, err, ck.Round, R)
	}
	l, err := db.Ledger(crashJob)
	if err != nil {
		t.Fatal(err)
	}
	// Write-ahead: every committed round has its event; at most the event
	// of the uncommitted next round is extra.
	if len(l) < R || len(l) > R+1 || len(l) < ledgerSeen {
		t.Fatalf("%d ledger entries for %d committed rounds (child saw %d appends)", len(l), R, ledgerSeen)
	}
	for i, e := range l {
		if e.Seq != uint64(i+1) || e.Round != i+1 || string(e.Event) != string(event(i+1)) {
			t.Fatalf("ledger[%d] = %+v", i, e)
		}
	}
	t.Logf("child reported %d commits: %d committed, %d ledger entries", committedSeen, R, len(l))
	between = len(l) == R+1

	// Resume as a restarted server would.
	next := R + 1
	if len(l) == R {
		if _, err := db.AppendLedger(crashJob, LedgerEntry{Round: next, Event: event(next)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CommitRound(crashJob, next, metricsFor(next), checkpointFor(next, crashParams)); err != nil {
		t.Fatalf("resume commit: %v", err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	return between
}
