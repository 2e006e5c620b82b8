package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Partitioner splits the example indices of a dataset with the given labels
// among numClients clients. Every index goes to exactly one client; a
// client may receive none (a population larger than the dataset, or a very
// skewed Dirichlet).
type Partitioner interface {
	Partition(labels []uint8, classes, numClients int, rng *rand.Rand) ([][]int32, error)
	String() string
}

// sizes deals n examples to k clients as evenly as possible.
func sizes(n, k int) []int {
	s := make([]int, k)
	for i := range s {
		s[i] = n / k
		if i < n%k {
			s[i]++
		}
	}
	return s
}

func checkClients(n, k int) error {
	if k < 1 || k > n {
		return fmt.Errorf("data: %d clients for %d examples: want 1 ≤ clients ≤ examples", k, n)
	}
	return nil
}

// IID shuffles the examples and deals near-equal shares.
type IID struct{}

func (IID) String() string { return "iid" }

// Partition implements Partitioner.
func (IID) Partition(labels []uint8, _ int, k int, rng *rand.Rand) ([][]int32, error) {
	if err := checkClients(len(labels), k); err != nil {
		return nil, err
	}
	perm := make([]int32, len(labels))
	for i := range perm {
		perm[i] = int32(i)
	}
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	out := make([][]int32, k)
	off := 0
	for i, s := range sizes(len(labels), k) {
		out[i] = perm[off : off+s : off+s]
		off += s
	}
	return out, nil
}

// Dirichlet is label-skewed non-IID partitioning (Hsu, Qi, Brown 2019,
// "Measuring the Effects of Non-Identical Data Distribution for Federated
// Visual Classification", §3). Client by client, in ID order: draw class
// proportions q ~ Dir(α·p), p the class prior of the dataset; then fill the
// client's near-equal share n/N one example at a time, drawing the class
// from q renormalised over the classes that still have examples, and the
// example uniformly without replacement within that class. α → ∞ tends to
// IID; small α gives clients few classes.
type Dirichlet struct {
	// Alpha is the concentration α > 0.
	Alpha float64
}

func (d Dirichlet) String() string { return fmt.Sprintf("dirichlet(alpha=%g)", d.Alpha) }

// Partition implements Partitioner.
func (d Dirichlet) Partition(labels []uint8, classes, k int, rng *rand.Rand) ([][]int32, error) {
	if !(d.Alpha > 0) || math.IsInf(d.Alpha, 0) {
		return nil, fmt.Errorf("data: dirichlet alpha must be a finite number > 0, got %v", d.Alpha)
	}
	if err := checkClients(len(labels), k); err != nil {
		return nil, err
	}
	pools := classPools(labels, classes, rng)
	prior := make([]float64, classes)
	for c, p := range pools {
		prior[c] = float64(len(p)) / float64(len(labels))
	}
	conc := make([]float64, classes)
	for c := range conc {
		conc[c] = d.Alpha * prior[c]
	}
	q := make([]float64, classes)
	out := make([][]int32, k)
	all := make([]int32, 0, len(labels))
	for i, s := range sizes(len(labels), k) {
		start := len(all)
		if s > 0 {
			sampleDirichlet(q, conc, rng)
		}
		for range s {
			c := drawClass(q, pools, rng)
			p := pools[c]
			all = append(all, p[len(p)-1])
			pools[c] = p[:len(p)-1]
		}
		out[i] = all[start:len(all):len(all)]
	}
	return out, nil
}

// classPools lists each class's example indices in random order (so taking
// from the end is drawing without replacement).
func classPools(labels []uint8, classes int, rng *rand.Rand) [][]int32 {
	pools := make([][]int32, classes)
	for i, l := range labels {
		pools[l] = append(pools[l], int32(i))
	}
	for _, p := range pools {
		rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	}
	return pools
}

// drawClass draws c with probability ∝ q[c] among non-empty pools; when q
// puts no mass on any non-empty pool, it falls back to the pools' sizes.
func drawClass(q []float64, pools [][]int32, rng *rand.Rand) int {
	var total float64
	for c, p := range pools {
		if len(p) > 0 {
			total += q[c]
		}
	}
	if total > 0 {
		u := rng.Float64() * total
		last := -1
		for c, p := range pools {
			if len(p) == 0 {
				continue
			}
			last = c
			if u -= q[c]; u < 0 {
				return c
			}
		}
		return last
	}
	var n int
	for _, p := range pools {
		n += len(p)
	}
	u := rng.IntN(n)
	for c, p := range pools {
		if u < len(p) {
			return c
		}
		u -= len(p)
	}
	panic("data: drawClass from empty pools")
}

// sampleDirichlet writes a Dir(conc) draw into q, normalising Gamma(conc_c)
// draws in log space so that tiny concentrations do not underflow to 0/0.
func sampleDirichlet(q, conc []float64, rng *rand.Rand) {
	mx := math.Inf(-1)
	for c, a := range conc {
		if a <= 0 {
			q[c] = math.Inf(-1)
			continue
		}
		q[c] = logGamma(a, rng)
		mx = max(mx, q[c])
	}
	var s float64
	for c := range q {
		q[c] = math.Exp(q[c] - mx)
		s += q[c]
	}
	for c := range q {
		q[c] /= s
	}
}

// logGamma returns log X for X ~ Gamma(shape a, scale 1): Marsaglia & Tsang
// 2000 ("A Simple Method for Generating Gamma Variables") for a ≥ 1, and
// X = Y·U^(1/a) with Y ~ Gamma(a+1) for a < 1 (their §6), kept in logs.
func logGamma(a float64, rng *rand.Rand) float64 {
	if a < 1 {
		u := 1 - rng.Float64() // (0, 1]
		return logGamma(a+1, rng) + math.Log(u)/a
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return math.Log(d * v)
		}
	}
}

// Shards is the "pathological non-IID" partition of McMahan et al. 2017
// ("Communication-Efficient Learning of Deep Networks from Decentralized
// Data", §3): sort the examples by label, cut them into N·PerClient shards of
// near-equal size, and give each client PerClient shards chosen at random.
type Shards struct {
	// PerClient is the number of shards per client (2 in the paper).
	PerClient int
}

func (s Shards) String() string { return fmt.Sprintf("shards(per_client=%d)", s.PerClient) }

// Partition implements Partitioner.
func (s Shards) Partition(labels []uint8, _ int, k int, rng *rand.Rand) ([][]int32, error) {
	if s.PerClient < 1 {
		return nil, fmt.Errorf("data: shards per client must be ≥ 1, got %d", s.PerClient)
	}
	if err := checkClients(len(labels), k); err != nil {
		return nil, err
	}
	ns := k * s.PerClient
	if ns > len(labels) {
		return nil, fmt.Errorf("data: %d clients × %d shards exceed %d examples", k, s.PerClient, len(labels))
	}
	sorted := make([]int32, len(labels))
	for i := range sorted {
		sorted[i] = int32(i)
	}
	slices.SortStableFunc(sorted, func(a, b int32) int { return int(labels[a]) - int(labels[b]) })
	order := rng.Perm(ns)
	out := make([][]int32, k)
	bounds := sizes(len(labels), ns)
	starts := make([]int, ns+1)
	for i, b := range bounds {
		starts[i+1] = starts[i] + b
	}
	for c := range k {
		for j := range s.PerClient {
			sh := order[c*s.PerClient+j]
			out[c] = append(out[c], sorted[starts[sh]:starts[sh+1]]...)
		}
	}
	return out, nil
}

// ParsePartitioner returns the partitioner named name ("iid", "dirichlet",
// "shards") with its parameter; a bad parameter is an error naming it.
func ParsePartitioner(name string, alpha float64, shards int) (Partitioner, error) {
	switch name {
	case "iid":
		return IID{}, nil
	case "dirichlet":
		if !(alpha > 0) || math.IsInf(alpha, 0) {
			return nil, fmt.Errorf("dirichlet_alpha must be a finite number > 0, got %v", alpha)
		}
		return Dirichlet{Alpha: alpha}, nil
	case "shards":
		if shards < 1 {
			return nil, fmt.Errorf("shards_per_client must be ≥ 1, got %d", shards)
		}
		return Shards{PerClient: shards}, nil
	}
	return nil, fmt.Errorf("unknown partition %q (known: iid, dirichlet, shards)", name)
}
