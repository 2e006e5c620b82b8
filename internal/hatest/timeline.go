package hatest

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// FaultKind names a fault the suite injects.
type FaultKind string

const (
	// LeaderKill is kill -9 of the job's leader replica mid-round (it is
	// restarted after the next commit).
	LeaderKill FaultKind = "leader kill -9"
	// LeaderStop is SIGSTOP of the leader replica, SIGCONT after a while.
	LeaderStop FaultKind = "leader SIGSTOP"
	// LinkBlackhole drops all traffic between the leader replica and
	// etcd for a while (its proxies).
	LinkBlackhole FaultKind = "leader's etcd link blackholed"
	// MemberKill is kill -9 of one etcd member, restarted after a while.
	MemberKill FaultKind = "etcd member kill -9"
	// QuorumLoss is kill -9 of two of the three etcd members together,
	// restarted after a while.
	QuorumLoss FaultKind = "etcd 2 of 3 members kill -9"
)

// Fault is one injected fault and what followed it.
type Fault struct {
	Kind   FaultKind
	Target string // the replica or member(s)
	// At is when it was injected; Lifted when it ended (the replica or
	// members restarted, resumed, the link restored).
	At, Lifted time.Time
	// Round is the last commit seen before it; MidRound says the leader
	// had charged round Round+1 and not committed it.
	Round    int
	MidRound bool
	// Epoch is the leader's epoch when the fault hit it (leader faults).
	Epoch int64
	Note  string

	// Set by Analyze.
	// Next is the first round committed after the fault began (prepared
	// after At: its release leaf's time is ≥ At), NextAt when a poller
	// first saw it, Gap the time from At (from Lifted for QuorumLoss) to
	// NextAt. Next is 0 when no commit followed.
	Next   int
	NextAt time.Time
	Gap    time.Duration
	// During are the rounds seen committed before Lifted though prepared
	// after At: for QuorumLoss, commits made without a quorum.
	During []int
	// TakeoverAt is, for a leader fault, when a poll first showed a
	// leader of a later epoch (zero if none did).
	TakeoverAt time.Time
}

// Commits is what the suite knows of a job's commits: when pollers first
// saw each round, and the times of its release leaves (a round released
// twice has two); Obs are the polls (for the leaders they saw).
type Commits struct {
	FirstSeen map[int]time.Time
	Releases  map[int][]time.Time
	Obs       []Obs
}

// Analyze fills each fault's Next, NextAt, Gap, During and TakeoverAt.
func Analyze(faults []Fault, c Commits) {
	rounds := make([]int, 0, len(c.Releases))
	for r := range c.Releases {
		rounds = append(rounds, r)
	}
	sort.Ints(rounds)
	for i := range faults {
		f := &faults[i]
		f.Next, f.NextAt, f.Gap, f.During, f.TakeoverAt = 0, time.Time{}, 0, nil, time.Time{}
		if f.MidRound {
			// The log showed round Round+1 charged and not released; if
			// its release was written before the fault all the same, the
			// fault hit the leader as it committed, not mid-round.
			for _, lt := range c.Releases[f.Round+1] {
				if lt.Before(f.At) {
					f.MidRound = false
					f.Note = strings.TrimSpace(f.Note + fmt.Sprintf("; hit as round %d committed", f.Round+1))
				}
			}
		}
		if f.Epoch > 0 {
			for _, o := range c.Obs {
				if o.Err == "" && o.Epoch > f.Epoch && o.At.After(f.At) && (f.TakeoverAt.IsZero() || o.At.Before(f.TakeoverAt)) {
					f.TakeoverAt = o.At
				}
			}
		}
		for _, r := range rounds {
			if !preparedSince(c.Releases[r], f.At) {
				continue
			}
			seen, ok := c.FirstSeen[r]
			if !ok {
				continue // never seen: the job ended before a poll? keep looking
			}
			if f.Kind == QuorumLoss && !f.Lifted.IsZero() && seen.Before(f.Lifted) {
				f.During = append(f.During, r)
				continue
			}
			f.Next, f.NextAt = r, seen
			from := f.At
			if f.Kind == QuorumLoss && !f.Lifted.IsZero() {
				from = f.Lifted
			}
			f.Gap = seen.Sub(from)
			break
		}
	}
}

// preparedSince reports whether a release leaf of the round was written
// at or after t (by the server's clock, which is the test's: one host).
func preparedSince(times []time.Time, t time.Time) bool {
	for _, lt := range times {
		if !lt.Before(t) {
			return true
		}
	}
	return false
}

// Table formats the faults for the summary, times from t0.
func Table(faults []Fault, t0 time.Time) string {
	var b strings.Builder
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "      -"
		}
		return fmt.Sprintf("%7.2fs", t.Sub(t0).Seconds())
	}
	fmt.Fprintf(&b, "%-3s %-31s %-10s %8s %8s %6s %-4s %9s %6s %8s %8s  %s\n", "#", "fault", "target", "at", "lifted", "round", "mid", "takeover", "next", "seen", "gap", "note")
	for i, f := range faults {
		mid := "-"
		if f.Kind == LeaderKill || f.Kind == LeaderStop || f.Kind == LinkBlackhole {
			mid = map[bool]string{true: "yes", false: "no"}[f.MidRound]
		}
		next, gap, takeover := "-", "-", "-"
		if !f.TakeoverAt.IsZero() {
			takeover = fmt.Sprintf("+%.2fs", f.TakeoverAt.Sub(f.At).Seconds())
		}
		if f.Next > 0 {
			next, gap = fmt.Sprint(f.Next), fmt.Sprintf("%.2fs", f.Gap.Seconds())
		}
		note := f.Note
		if len(f.During) > 0 {
			note = strings.TrimSpace(note + fmt.Sprintf(" COMMITS WITHOUT QUORUM: rounds %v", f.During))
		}
		fmt.Fprintf(&b, "%-3d %-31s %-10s %8s %8s %6d %-4s %9s %6s %8s %8s  %s\n", i+1, f.Kind, f.Target, rel(f.At), rel(f.Lifted), f.Round, mid, takeover, next, rel(f.NextAt), gap, note)
	}
	return b.String()
}

// LogCheck is what the transparency log says of one job.
type LogCheck struct {
	// Releases and Charges count the job's release and charge leaves by
	// round; ReleaseTimes are the releases' leaf times.
	Releases     map[int]int
	Charges      map[int]int
	ReleaseTimes map[int][]time.Time
	// Committed is the highest round released; ChargeLeaves the number of
	// charge leaves.
	Committed, ChargeLeaves int
}

// ReadLog tallies job's leaves.
func ReadLog(leaves []Leaf, job string) LogCheck {
	lc := LogCheck{Releases: map[int]int{}, Charges: map[int]int{}, ReleaseTimes: map[int][]time.Time{}}
	for _, l := range leaves {
		if l.Job != job {
			continue
		}
		switch l.Kind {
		case "release":
			lc.Releases[l.Round]++
			lc.ReleaseTimes[l.Round] = append(lc.ReleaseTimes[l.Round], l.Time)
			lc.Committed = max(lc.Committed, l.Round)
		case "charge":
			lc.Charges[l.Round]++
			lc.ChargeLeaves++
		}
	}
	return lc
}

// Problems lists what violates the suite's log properties for a DP job
// of rounds rounds: every round 1 … rounds released exactly once (a
// round released twice is a duplicate commit), every released round
// charged at least once, no charge of a round beyond the last commit + 1.
func (lc LogCheck) Problems(rounds int) []string {
	var out, missing []string
	for r := 1; r <= rounds; r++ {
		switch n := lc.Releases[r]; {
		case n == 0:
			missing = append(missing, fmt.Sprint(r))
		case n > 1:
			out = append(out, fmt.Sprintf("round %d was committed %d times (release leaves at %v)", r, n, lc.ReleaseTimes[r]))
		}
		if lc.Releases[r] > 0 && lc.Charges[r] == 0 {
			out = append(out, fmt.Sprintf("round %d was committed without a charge in the log (under-count)", r))
		}
	}
	if len(missing) > 0 {
		out = append(out, fmt.Sprintf("%d rounds were never released (committed): %s", len(missing), ranges(missing)))
	}
	for r := range lc.Releases {
		if r < 1 || r > rounds {
			out = append(out, fmt.Sprintf("a release of round %d, outside 1 … %d", r, rounds))
		}
	}
	for r := range lc.Charges {
		if r > lc.Committed+1 || r < 1 {
			out = append(out, fmt.Sprintf("a charge of round %d, but the last commit is round %d", r, lc.Committed))
		}
	}
	sort.Strings(out)
	return out
}

// ranges shortens a sorted list of consecutive numbers: 3 4 5 7 → "3–5 7".
func ranges(ns []string) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && atoi(ns[j+1]) == atoi(ns[j])+1 {
			j++
		}
		if j > i {
			parts = append(parts, ns[i]+"–"+ns[j])
		} else {
			parts = append(parts, ns[i])
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}

func atoi(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}

// Extra is the number of charges beyond one per committed round.
func (lc LogCheck) Extra() int { return lc.ChargeLeaves - len(lc.Releases) }

// Outages lists, per replica, the spans in which its polls of the job
// failed (a paused or blackholed replica, a store it cannot reach), with
// the first error of each, times from t0: what a fault left behind, and
// for how long.
func Outages(obs []Obs, t0 time.Time) string {
	type span struct {
		from, to time.Time
		n        int
		err      string
	}
	open := map[string]*span{}
	var out []string
	closeSpan := func(id string, sp *span, end string) {
		msg := sp.err
		if len(msg) > 120 {
			msg = msg[:120] + "…"
		}
		out = append(out, fmt.Sprintf("  %s: %7.2fs – %7.2fs (%5.2fs, %d failed polls%s): %s", id, sp.from.Sub(t0).Seconds(), sp.to.Sub(t0).Seconds(), sp.to.Sub(sp.from).Seconds(), sp.n, end, msg))
	}
	sorted := append([]Obs(nil), obs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At.Before(sorted[j].At) })
	for _, o := range sorted {
		sp := open[o.Replica]
		switch {
		case o.Err != "" && sp == nil:
			open[o.Replica] = &span{from: o.At, to: o.At, n: 1, err: o.Err}
		case o.Err != "":
			sp.to, sp.n = o.At, sp.n+1
		case sp != nil:
			sp.to = o.At
			closeSpan(o.Replica, sp, "")
			delete(open, o.Replica)
		}
	}
	ids := make([]string, 0, len(open))
	for id := range open {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		closeSpan(id, open[id], ", still failing at the last poll")
	}
	if len(out) == 0 {
		return "  none\n"
	}
	return strings.Join(out, "\n") + "\n"
}
