package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Dirichlet is the label-skewed non-IID partition of Hsu, Qi, Brown 2019
// ("Measuring the Effects of Non-Identical Data Distribution for Federated
// Visual Classification", §3): each client's labels follow its own class
// distribution q ~ Dir(α·p), where p is the class prior. α → ∞ tends to
// IID (q → p); small α concentrates each client on few classes (at α = 0.1
// over 10 balanced classes, most clients are dominated by one or two).
//
// Exact procedure, with n examples, N clients and C classes:
//
//  1. p_c = n_c/n, the dataset's class frequencies.
//  2. Each class's example indices are shuffled into a pool.
//  3. Client sizes are near-equal: ⌊n/N⌋ or ⌈n/N⌉ (which clients get the
//     larger share is uniformly random). With N > n, n random clients get
//     one example and the others none.
//  4. For each client i = 0, …, N−1 in turn with size s_i > 0: draw
//     q ~ Dir(α·p) (Gamma variates by Marsaglia–Tsang, see gammaLog), then
//     s_i times: draw a class c with probability q_c / Σ q_c′ over the
//     classes c′ whose pools are not yet empty (renormalising over the
//     remaining classes once a class runs out) and take the next example
//     of pool c. Sampling is thus without replacement within a class.
//
// Every example is assigned exactly once. Because pools run dry, the last
// clients are pushed toward the classes that remain, so their labels are
// less skewed (or differently skewed) than q alone would make them; with
// many clients this affects a small tail. A client may end up with no
// examples (step 3); a client whose q puts all mass on exhausted classes
// falls back to the sizes of the remaining pools.
type Dirichlet struct {
	// Alpha is the concentration α, finite and > 0.
	Alpha float64
}

// String returns e.g. "dirichlet(alpha=0.1)".
func (d Dirichlet) String() string { return fmt.Sprintf("dirichlet(alpha=%g)", d.Alpha) }

// Partition implements Partitioner; see Dirichlet for the procedure.
// Time O(n·C + N), memory O(n + N + C).
func (d Dirichlet) Partition(labels []uint8, classes, numClients int, rng *rand.Rand) ([][]int32, error) {
	if err := checkAlpha(d.Alpha); err != nil {
		return nil, err
	}
	if err := checkPartitionArgs(labels, classes, numClients); err != nil {
		return nil, err
	}
	n := len(labels)
	sorted := sortByLabel(labels, classes, rng)
	pools := make([][]int32, classes) // pool c is drawn from its end
	conc := make([]float64, classes)  // α·p_c
	off := 0
	for c := range pools {
		m := 0
		for off+m < n && int(labels[sorted[off+m]]) == c {
			m++
		}
		pools[c] = sorted[off : off+m : off+m]
		off += m
		conc[c] = d.Alpha * float64(m) / float64(n)
	}
	logq := make([]float64, classes)
	w := make([]float64, classes)
	flat := make([]int32, 0, n)
	out := make([][]int32, numClients)
	for i, s := range shares(n, numClients, rng) {
		if s == 0 {
			continue
		}
		dirichletLog(logq, conc, rng)
		total := classWeights(w, logq, pools)
		start := len(flat)
		for range s {
			c := pickClass(w, total, rng)
			p := pools[c]
			flat = append(flat, p[len(p)-1])
			pools[c] = p[:len(p)-1]
			if len(p) == 1 { // class c ran out: renormalise over the rest
				total = classWeights(w, logq, pools)
			}
		}
		out[i] = flat[start:len(flat):len(flat)]
	}
	return out, nil
}

// classWeights sets w_c ∝ q_c = exp(logq_c) for the classes with a
// non-empty pool and w_c = 0 for the others, scaled so that the largest is
// 1 (so that tiny α, whose log q differ by hundreds, does not underflow to
// 0/0); it returns Σ w. If q puts no mass on any remaining class, the
// weights fall back to the pools' sizes.
func classWeights(w, logq []float64, pools [][]int32) float64 {
	mx := math.Inf(-1)
	for c, p := range pools {
		if len(p) > 0 {
			mx = max(mx, logq[c])
		}
	}
	var total float64
	for c, p := range pools {
		w[c] = 0
		if len(p) > 0 && !math.IsInf(mx, -1) {
			w[c] = math.Exp(logq[c] - mx)
		}
		total += w[c]
	}
	if total > 0 && !math.IsInf(total, 0) {
		return total
	}
	total = 0
	for c, p := range pools {
		w[c] = float64(len(p))
		total += w[c]
	}
	return total
}

// pickClass draws c with probability w_c/total, where total = Σ w > 0.
func pickClass(w []float64, total float64, rng *rand.Rand) int {
	u := rng.Float64() * total
	last := -1
	for c, x := range w {
		if x <= 0 {
			continue
		}
		last = c
		if u -= x; u < 0 {
			return c
		}
	}
	return last // u ≥ 0 only through rounding: take the last possible class
}

// dirichletLog writes log q for q ~ Dir(conc) into dst, up to a common
// additive constant (log Gamma variates, unnormalised); classes with
// conc_c = 0 get −∞. Staying in logs matters for small α·p_c, where the
// Gamma variates themselves underflow to 0.
func dirichletLog(dst, conc []float64, rng *rand.Rand) {
	for c, a := range conc {
		if a > 0 {
			dst[c] = gammaLog(a, rng)
		} else {
			dst[c] = math.Inf(-1)
		}
	}
}

// sampleDirichlet writes q ~ Dir(conc) into dst: q_c = G_c / Σ G, with
// G_c ~ Gamma(conc_c, 1) independent (the standard construction, e.g.
// Devroye 1986, "Non-Uniform Random Variate Generation", §XI.4), normalised
// in log space. At least one conc_c must be > 0.
func sampleDirichlet(dst, conc []float64, rng *rand.Rand) {
	dirichletLog(dst, conc, rng)
	mx := math.Inf(-1)
	for _, l := range dst {
		mx = max(mx, l)
	}
	var s float64
	for c, l := range dst {
		dst[c] = math.Exp(l - mx)
		s += dst[c]
	}
	for c := range dst {
		dst[c] /= s
	}
}

// gammaLog returns log X for X ~ Gamma(shape a, scale 1), a > 0.
//
// For a ≥ 1 it is Marsaglia & Tsang 2000 ("A Simple Method for Generating
// Gamma Variables", ACM TOMS 26(3)): d = a − 1/3, c = 1/√(9d); repeat
// x ~ N(0,1), v = (1+cx)³ until v > 0 and log U < x²/2 + d − dv + d·log v
// (after the cheap squeeze U < 1 − 0.0331x⁴); X = d·v. For a < 1 it uses
// their boost X = Y·U^(1/a) with Y ~ Gamma(a+1), in logs: log Y + log(U)/a,
// which stays finite where U^(1/a) would underflow.
func gammaLog(a float64, rng *rand.Rand) float64 {
	if a < 1 {
		u := 1 - rng.Float64() // (0, 1]
		return gammaLog(a+1, rng) + math.Log(u)/a
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
		x2 := x * x
		if u < 1-0.0331*x2*x2 || math.Log(u) < 0.5*x2+d-d*v+d*math.Log(v) {
			return math.Log(d * v)
		}
	}
}
