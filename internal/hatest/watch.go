package hatest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Obs is one poll of GET /v1/jobs/{id} on one replica.
type Obs struct {
	At      time.Time
	Replica string
	Err     string // "" when it answered
	Round   int
	State   string
	Leader  string // leader.replica ("" when absent)
	Epoch   int64
}

// Watcher polls one job on every live replica (every Interval), tails the
// transparency log from a live replica (every LogInterval) and scrapes
// every live replica's HA counters (every ScrapeInterval), recording
// when each round was first seen committed.
type Watcher struct {
	env                                   *Env
	job                                   string
	Interval, LogInterval, ScrapeInterval time.Duration

	mu        sync.Mutex
	obs       []Obs
	firstSeen map[int]time.Time
	maxRound  int
	last      JobView // the latest answer (by time of answer)
	lastAt    time.Time
	leaves    []Leaf
	// counters keeps, per replica and incarnation, the last scrape: a
	// restarted process counts from 0 again, so the totals add up every
	// incarnation's last values.
	counters map[string]map[int]Counters
	leafErrs int
	nextTail int

	stop chan struct{}
	wg   sync.WaitGroup
}

// Watch starts a Watcher of job id on e.
func Watch(e *Env, id string) *Watcher {
	w := &Watcher{
		env: e, job: id, Interval: 50 * time.Millisecond, LogInterval: 50 * time.Millisecond, ScrapeInterval: time.Second,
		firstSeen: map[int]time.Time{}, counters: map[string]map[int]Counters{}, stop: make(chan struct{}),
	}
	for _, r := range e.Replicas {
		w.wg.Add(2)
		go w.poll(r)
		go w.scrape(r)
	}
	w.wg.Add(1)
	go w.tailLog()
	return w
}

// Stop ends the watcher's goroutines.
func (w *Watcher) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

func (w *Watcher) sleep(d time.Duration) bool {
	select {
	case <-w.stop:
		return false
	case <-time.After(d):
		return true
	}
}

func (w *Watcher) poll(r *Replica) {
	defer w.wg.Done()
	for w.sleep(w.Interval) {
		if !r.Live() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		j, err := GetJob(ctx, r.URL, w.env.Token, w.job)
		cancel()
		o := Obs{At: time.Now(), Replica: r.ID}
		if err != nil {
			o.Err = err.Error()
		} else {
			o.Round, o.State = j.Round, j.State
			if j.Leader != nil {
				o.Leader, o.Epoch = j.Leader.Replica, j.Leader.Epoch
			}
		}
		w.mu.Lock()
		w.obs = append(w.obs, o)
		if err == nil {
			for r := w.maxRound + 1; r <= j.Round; r++ {
				w.firstSeen[r] = o.At
			}
			w.maxRound = max(w.maxRound, j.Round)
			if o.At.After(w.lastAt) {
				w.last, w.lastAt = j, o.At
			}
		}
		w.mu.Unlock()
	}
}

func (w *Watcher) tailLog() {
	defer w.wg.Done()
	for w.sleep(w.LogInterval) {
		w.fetchLeaves()
	}
}

// fetchLeaves reads the log's new leaves from the next live replica
// (round robin), reporting whether it got an answer.
func (w *Watcher) fetchLeaves() bool {
	live := w.env.Live()
	if len(live) == 0 {
		return false
	}
	w.mu.Lock()
	r := live[w.nextTail%len(live)]
	w.nextTail++
	start := int64(len(w.leaves))
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	ls, err := GetLeaves(ctx, r.URL, w.env.Token, start)
	cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.leafErrs++
		return false
	}
	if int64(len(w.leaves)) == start {
		w.leaves = append(w.leaves, ls...)
	}
	return true
}

func (w *Watcher) scrape(r *Replica) {
	defer w.wg.Done()
	for w.sleep(w.ScrapeInterval) {
		w.ScrapeNow(r)
	}
}

// ScrapeNow scrapes r's counters now (before a kill, say), if it is live.
func (w *Watcher) ScrapeNow(r *Replica) {
	if !r.Live() {
		return
	}
	inc := r.Incarnation()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c, err := GetCounters(ctx, r.URL, w.env.Token)
	cancel()
	if err != nil {
		return
	}
	w.mu.Lock()
	if w.counters[r.ID] == nil {
		w.counters[r.ID] = map[int]Counters{}
	}
	w.counters[r.ID][inc] = c
	w.mu.Unlock()
}

// Totals sums each counter over every replica's incarnations (their last
// scrapes), and reports which families no replica exported.
func (w *Watcher) Totals() (Counters, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tot := Counters{}
	seen := map[string]bool{}
	for _, byInc := range w.counters {
		for _, c := range byInc {
			for k, v := range c {
				tot[k] += v
				seen[k] = true
			}
		}
	}
	var missing []string
	for _, n := range haCounters {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	return tot, missing
}

// PerReplica formats each replica's counters by incarnation.
func (w *Watcher) PerReplica() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.counters))
	for id := range w.counters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	s := ""
	for _, id := range ids {
		incs := make([]int, 0)
		for i := range w.counters[id] {
			incs = append(incs, i)
		}
		sort.Ints(incs)
		for _, i := range incs {
			c := w.counters[id][i]
			s += fmt.Sprintf("  %s#%d: fenced_writes %g, phantom_wins %g\n", id, i, c[haCounters[0]], c[haCounters[1]])
		}
	}
	return s
}

// Round is the highest round seen committed.
func (w *Watcher) Round() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxRound
}

// Last is the latest answer any replica gave.
func (w *Watcher) Last() JobView {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// FirstSeen copies the first time each round was seen committed.
func (w *Watcher) FirstSeen() map[int]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[int]time.Time, len(w.firstSeen))
	for k, v := range w.firstSeen {
		m[k] = v
	}
	return m
}

// Observations copies every poll so far.
func (w *Watcher) Observations() []Obs {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Obs(nil), w.obs...)
}

// Leaves copies the log leaves tailed so far.
func (w *Watcher) Leaves() []Leaf {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Leaf(nil), w.leaves...)
}

// errStopped: the watcher stopped while a wait ran.
var errStopped = errors.New("watcher stopped")

// WaitFor polls cond every 10 ms until it holds (nil), timeout passes or
// the watcher stops.
func (w *Watcher) WaitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		if !w.sleep(10 * time.Millisecond) {
			return errStopped
		}
	}
	return nil
}

// WaitCommitAfter waits until a round after r is seen committed, and
// returns when that was first seen.
func (w *Watcher) WaitCommitAfter(r int, timeout time.Duration) (time.Time, error) {
	err := w.WaitFor(timeout, fmt.Sprintf("a commit after round %d", r), func() bool { return w.Round() > r })
	if err != nil {
		return time.Time{}, err
	}
	return w.FirstSeen()[r+1], nil
}

// MidRound reads the log's newest leaves now and reports whether they
// hold a charge of the job's round r+1 and no release of it, where r is
// its last release, while no poll has seen a later commit either: the
// leader is between a round's write-ahead charge and its commit. It
// returns r.
func (w *Watcher) MidRound() (int, bool) {
	if !w.fetchLeaves() {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, charged := 0, 0
	for _, l := range w.leaves {
		if l.Job != w.job {
			continue
		}
		switch l.Kind {
		case "release":
			last = max(last, l.Round)
		case "charge":
			charged = max(charged, l.Round)
		}
	}
	return last, charged == last+1 && w.maxRound <= last
}
