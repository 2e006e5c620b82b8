package hatest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/audit"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// Analyze finds the first commit prepared after each fault began: a round
// committed by the old leader just before a kill (seen after it) is not
// the failover's commit; commits seen before a quorum came back are
// flagged.
func TestAnalyze(t *testing.T) {
	c := Commits{
		FirstSeen: map[int]time.Time{5: at(10.05), 6: at(12.1), 7: at(12.5), 8: at(23), 9: at(27)},
		Releases:  map[int][]time.Time{5: {at(9.9)}, 6: {at(12)}, 7: {at(12.4)}, 8: {at(22)}, 9: {at(26.5)}},
		Obs: []Obs{
			{At: at(9), Epoch: 7}, {At: at(10.5), Err: "refused"}, {At: at(11), Epoch: 7}, {At: at(11.9), Epoch: 12}, {At: at(11.8), Epoch: 12}, {At: at(12), Epoch: 15},
		},
	}
	faults := []Fault{
		{Kind: LeaderKill, At: at(10), Epoch: 7, Round: 4, MidRound: true},
		{Kind: LeaderStop, At: at(11), Lifted: at(16)},
		{Kind: QuorumLoss, At: at(20), Lifted: at(26)},
		{Kind: LeaderKill, At: at(30)},
	}
	Analyze(faults, c)
	type res struct {
		next   int
		gap    time.Duration
		during []int
	}
	want := []res{{6, 2100 * time.Millisecond, nil}, {6, 1100 * time.Millisecond, nil}, {9, time.Second, []int{8}}, {0, 0, nil}}
	for i, f := range faults {
		got := res{f.Next, f.Gap.Round(time.Millisecond), f.During}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("fault %d: next %d gap %v during %v, want %+v", i, got.next, got.gap, got.during, want[i])
		}
	}
	if faults[0].MidRound || !strings.Contains(faults[0].Note, "hit as round 5 committed") {
		t.Errorf("a kill after round 5's release leaf was written is not mid-round: %+v", faults[0])
	}
	if got := faults[0].TakeoverAt; !got.Equal(at(11.8)) {
		t.Errorf("takeover at %v, want the first poll of a later epoch, 11.8 s", got.Sub(t0))
	}
	if !faults[1].TakeoverAt.IsZero() {
		t.Error("a takeover for a fault with no epoch")
	}
	tab := Table(faults, t0)
	if !strings.Contains(tab, "COMMITS WITHOUT QUORUM: rounds [8]") || !strings.Contains(tab, "+1.80s") || strings.Count(tab, "\n") != len(faults)+1 {
		t.Errorf("table:\n%s", tab)
	}
}

func leaf(kind, job string, round int, s float64) Leaf {
	return Leaf{Leaf: audit.Leaf{Kind: kind, Job: job, Round: round, Time: at(s)}}
}

// The log checks find a round committed twice, rounds never committed, a
// commit without a charge and a charge past the last commit; extra
// charges are counted, not flagged.
func TestLogProblems(t *testing.T) {
	var ls []Leaf
	for r := 1; r <= 6; r++ {
		if r != 4 {
			ls = append(ls, leaf("charge", "j", r, float64(r)))
		}
		if r <= 5 {
			ls = append(ls, leaf("release", "j", r, float64(r)+0.5))
		}
	}
	ls = append(ls, leaf("charge", "j", 2, 2.2), leaf("release", "j", 3, 3.7), leaf("release", "other", 1, 1), leaf("charge", "j", 9, 9))
	lc := ReadLog(ls, "j")
	if lc.Committed != 5 || lc.ChargeLeaves != 7 || lc.Extra() != 2 {
		t.Fatalf("committed %d, charges %d, extra %d", lc.Committed, lc.ChargeLeaves, lc.Extra())
	}
	got := strings.Join(lc.Problems(8), "\n")
	for _, want := range []string{"round 3 was committed 2 times", "round 4 was committed without a charge", "3 rounds were never released (committed): 6–8", "a charge of round 9, but the last commit is round 5"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if n := len(lc.Problems(8)); n != 4 {
		t.Errorf("%d problems, want 4:\n%s", n, got)
	}
	if r := ranges([]string{"1", "3", "4", "5", "7", "8"}); r != "1 3–5 7–8" {
		t.Errorf("ranges: %q", r)
	}
}

// The counters are summed over labels and read from either exposition.
func TestParseCounters(t *testing.T) {
	text := `# HELP dpfl_store_fenced_writes_total Writes refused.
# TYPE dpfl_store_fenced_writes_total counter
dpfl_store_fenced_writes_total 3
dpfl_store_fenced_writes_created 1.7e9
dpfl_leader_phantom_wins_total{reason="a"} 1
dpfl_leader_phantom_wins_total{reason="b"} 2 1700000000000
dpfl_store_fenced_writes_total_other 99
`
	c, err := parseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if c["dpfl_store_fenced_writes_total"] != 3 || c["dpfl_leader_phantom_wins_total"] != 3 || len(c) != 2 {
		t.Fatalf("counters %v", c)
	}
}

// Outages joins each replica's consecutive failed polls into spans.
func TestOutages(t *testing.T) {
	obs := []Obs{
		{At: at(1), Replica: "r0"}, {At: at(2), Replica: "r0", Err: "HTTP 503: store unavailable"}, {At: at(2.5), Replica: "r1", Err: "refused"},
		{At: at(3), Replica: "r0", Err: "HTTP 503: again"}, {At: at(4), Replica: "r0"}, {At: at(5), Replica: "r0", Err: "timeout"},
	}
	got := Outages(obs, t0)
	for _, want := range []string{
		"r0:    2.00s –    4.00s ( 2.00s, 2 failed polls): HTTP 503: store unavailable",
		"r0:    5.00s –    5.00s ( 0.00s, 1 failed polls, still failing at the last poll): timeout",
		"r1:    2.50s –    2.50s ( 0.00s, 1 failed polls, still failing at the last poll): refused",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("outages lack %q:\n%s", want, got)
		}
	}
	if Outages(nil, t0) != "  none\n" {
		t.Error("no polls: want none")
	}
}
