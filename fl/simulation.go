package fl

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// Simulation is how a simulated population departs from every sampled
// client finishing its local work: stragglers, each report's modelled
// device time, and the reports the round keeps (a deadline, an
// over-selection target). Every rule decides a client's fate from its own
// data and seeded draws (a Target also from the others' device times) and
// only shortens or removes a contribution, never re-weights one
// (Participation's DP semantics; Sensitivity for the Target's). The zero
// value simulates nothing: every client trains its E epochs and reports.
type Simulation struct {
	// Stragglers is the fraction of each cohort that cannot finish its
	// local work (FedProx's systems heterogeneity, Li et al. 2020 §5.2):
	// each such client runs a uniformly random number of epochs in
	// [1, E]. With DropStragglers their updates are discarded instead
	// (FedAvg's behaviour in that paper) — under DP a discarded update
	// only removes a contribution, so the accounted ε still holds.
	Stragglers     float64
	DropStragglers bool
	// RoundTime, when set, estimates each round's wall-clock time on real
	// devices (RoundStats.EstimatedSeconds): the model is downloaded as
	// float32 (4d bytes), uploaded as float32 or as the aggregator's
	// protocol traffic (secure aggregation), and every client that
	// reported counts towards the slowest device.
	RoundTime *RoundTimeModel
	// DeadlineSeconds, when > 0, discards reports whose estimated device
	// time exceeds it; Target, when > 0, keeps only the Target earliest
	// reports (over-selection: the round closes when Target devices have
	// reported). Both need RoundTime. With Target the cohort's updates
	// are held until the round closes: memory O(cohort · d).
	DeadlineSeconds float64
	Target          int
}

// stragglerStream separates the straggler draws from the shuffles, and
// deviceStream the round-time model's device factors.
const (
	stragglerStream = 0x5354524147474c45 // "STRAGGLE"
	deviceStream    = 0x4445564943455321 // "DEVICES!"
)

// simRand is one worker's generator for a client's seeded draws (its
// shuffles, the simulation's), reseeded per (round, client) so that a
// client's draws do not depend on which worker trains it or on the other
// clients.
type simRand struct {
	pcg *rand.PCG
	rng *rand.Rand
}

func newSimRand() simRand {
	pcg := rand.NewPCG(0, 0)
	return simRand{pcg, rand.New(pcg)}
}

// at reseeds g for the draws of purpose stream (0: the shuffles) for
// client id in round.
func (g simRand) at(seed, stream uint64, round, id int) *rand.Rand {
	g.pcg.Seed(seed^stream, uint64(round)<<32|uint64(id))
	return g.rng
}

// epochs returns the local epochs of client id in round out of E,
// whether it straggles, and whether it is a straggler that does not report.
func (s Simulation) epochs(g simRand, seed uint64, round, id, E int) (epochs int, straggler, drop bool) {
	if s.Stragglers <= 0 {
		return E, false, false
	}
	rng := g.at(seed, stragglerStream, round, id)
	switch {
	case rng.Float64() >= s.Stragglers:
		return E, false, false
	case s.DropStragglers:
		return 0, true, true
	}
	return 1 + rng.IntN(E), true, false
}

// device draws client id's device factors for local training modelled to
// take simSeconds; the zero DeviceTime without a round-time model.
// Modelled, never measured: a measured time would depend on the other
// clients' work through CPU contention, and the deadline and the Target
// must decide each report from its own data alone.
func (s Simulation) device(g simRand, seed uint64, round, id int, simSeconds float64) DeviceTime {
	if s.RoundTime == nil {
		return DeviceTime{}
	}
	return s.RoundTime.Device(simSeconds, g.at(seed, deviceStream, round, id))
}

// late reports whether a report from dev, for a model of d parameters,
// misses the deadline.
func (s Simulation) late(dev DeviceTime, d int) bool {
	if s.RoundTime == nil || s.DeadlineSeconds <= 0 {
		return false
	}
	bytes := 4 * float64(d)
	return s.RoundTime.ClientSeconds(bytes, bytes, dev) > s.DeadlineSeconds
}

// earliest sorts held reports by their device time (a model of d
// parameters) and returns how many of them the Target keeps: the round
// closes when the Target-th arrives. Ties go to the smaller client ID,
// never to the order in which the clients finished training.
func (s Simulation) earliest(held []report, d int) int {
	bytes := 4 * float64(d)
	at := func(r report) float64 {
		if s.RoundTime == nil {
			return 0 // no device times: the smaller IDs
		}
		return s.RoundTime.ClientSeconds(bytes, bytes, r.dev)
	}
	slices.SortFunc(held, func(a, b report) int { return cmp.Or(cmp.Compare(at(a), at(b)), cmp.Compare(a.id, b.id)) })
	return min(s.Target, len(held))
}
