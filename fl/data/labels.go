package data

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// LabelsPerClient is the pathological non-IID partition of FedProx's MNIST
// experiments (Li et al., "Federated Optimization in Heterogeneous
// Networks", MLSys 2020, §5.1 and Appendix C: "each device has samples
// of only 2 digits and the number of samples per device follows a power
// law"): every client holds examples of exactly K labels.
//
// Procedure, with N clients and C classes:
//
//  1. Client i holds the K distinct labels (i + j) mod C, j = 0, …, K−1,
//     as in the authors' generate_niid.py (client i gets digits i mod 10
//     and (i+1) mod 10). The choice is deterministic; only the examples
//     and sizes are random. Label c is thus held by the clients i with
//     (c − i) mod C < K: about N·K/C of them, exactly N·K/C when C
//     divides N. Every class with examples needs a holder, so N + K − 1
//     must be at least C (always true for N ≥ C).
//  2. Each label's examples, in uniformly random order, are dealt to its
//     h holders: with Sigma = 0, near-equal shares (⌊n_c/h⌋ or one more,
//     the larger shares to uniformly random holders); with Sigma > 0, one
//     example to every holder and the remaining n_c − h in proportion to
//     weights w ~ lognormal(0, Sigma), independent per (client, label),
//     rounded down with the leftover examples going to the largest
//     fractional parts (Hamilton's method), which makes client sizes
//     heavy-tailed ("power law"). FedProx draws lognormal(0, 2) weights
//     after giving every (client, label) 5 examples and drops the examples
//     that rounding leaves over; here every example is assigned, exactly
//     once. If a label has fewer examples than holders (n_c < h), n_c
//     uniformly random holders get one each, and the others lack it.
//
// So a client has at most K labels, and exactly K whenever every label
// has at least as many examples as holders. Unlike Shards, the label sets
// do not depend on the data's order or size.
type LabelsPerClient struct {
	// K is the number of labels per client, in [1, classes] (2 in
	// FedProx's MNIST).
	K int
	// Sigma ≥ 0 (finite) is the lognormal σ of the per-(client, label)
	// size weights; 0 deals equal shares. FedProx's MNIST uses 2.
	Sigma float64
}

// String returns e.g. "labels(per_client=2,sigma=2)".
func (l LabelsPerClient) String() string {
	return fmt.Sprintf("labels(per_client=%d,sigma=%g)", l.K, l.Sigma)
}

// Partition implements Partitioner; see LabelsPerClient for the
// procedure. Errors: K < 1 or K > classes (naming labels_per_client),
// Sigma negative or not finite (labels_sigma), a class with examples but
// no holder, N·K above 2^25 (labels_per_client), and the errors shared by
// all partitioners. Time O(n + C + N·K·log N), memory O(n + N·K).
func (l LabelsPerClient) Partition(labels []uint8, classes, numClients int, rng *rand.Rand) ([][]int32, error) {
	if err := checkLabelsPerClient(l.K, l.Sigma); err != nil {
		return nil, err
	}
	if err := checkPartitionArgs(labels, classes, numClients); err != nil {
		return nil, err
	}
	if l.K > classes {
		return nil, fmt.Errorf("labels_per_client must be at most the %d classes, got %d", classes, l.K)
	}
	if numClients*l.K > maxLabelSlots {
		return nil, fmt.Errorf("labels_per_client: %d clients × %d labels exceed %d (client, label) slots", numClients, l.K, maxLabelSlots)
	}
	sorted := sortByLabel(labels, classes, rng)
	start := make([]int, classes+1) // class c is sorted[start[c]:start[c+1]]
	for _, y := range labels {
		start[int(y)+1]++
	}
	for c := range classes {
		start[c+1] += start[c]
	}
	// holders[c] lists the clients holding label c, in increasing order.
	holders := make([][]int32, classes)
	for i := range numClients {
		for j := range l.K {
			c := (i + j) % classes
			holders[c] = append(holders[c], int32(i))
		}
	}
	// got[i*K+j] is how many examples of label (i+j) mod C client i gets.
	got := make([]int32, numClients*l.K)
	var w []float64
	for c := range classes {
		n, h := start[c+1]-start[c], len(holders[c])
		if n == 0 {
			continue
		}
		if h == 0 {
			return nil, fmt.Errorf("labels_per_client: with %d clients and %d labels each, class %d has no client (clients + labels_per_client − 1 must be ≥ %d classes)", numClients, l.K, c, classes)
		}
		var sizes []int32
		if l.Sigma == 0 || n < h {
			sizes = shares(n, h, rng)
		} else {
			// w_k = exp(σ z_k − max σ z), so huge σ cannot overflow.
			w = w[:0]
			mx := math.Inf(-1)
			for range h {
				w = append(w, l.Sigma*rng.NormFloat64())
				mx = max(mx, w[len(w)-1])
			}
			for k := range w {
				w[k] = math.Exp(w[k] - mx)
			}
			sizes = apportion(n-h, w)
			for k := range sizes {
				sizes[k]++
			}
		}
		for k, i := range holders[c] {
			j := (c - int(i)%classes + classes) % classes
			got[int(i)*l.K+j] = sizes[k]
		}
	}
	next := slices.Clone(start[:classes])
	flat := make([]int32, 0, len(labels))
	out := make([][]int32, numClients)
	for i := range out {
		s := len(flat)
		for j := range l.K {
			c := (i + j) % classes
			m := int(got[i*l.K+j])
			flat = append(flat, sorted[next[c]:next[c]+m]...)
			next[c] += m
		}
		out[i] = flat[s:len(flat):len(flat)]
	}
	return out, nil
}

// maxLabelSlots bounds N·K for LabelsPerClient (two int32 per slot, so
// at most 256 MiB).
const maxLabelSlots = 1 << 25

// apportion splits m items in proportion to the positive weights w by
// Hamilton's largest-remainder method: ⌊m·w_k/Σw⌋ each, then one more to
// the largest fractional parts (ties to the lower index) until all m are
// given out.
func apportion(m int, w []float64) []int32 {
	var total float64
	for _, x := range w {
		total += x
	}
	out := make([]int32, len(w))
	frac := make([]float64, len(w))
	left := m
	for k, x := range w {
		q := float64(m) * x / total
		f := math.Floor(q)
		out[k] = int32(f)
		frac[k] = q - f
		left -= int(f)
	}
	// Rounding may leave left slightly outside [0, len(w)]; the loop
	// below gives out exactly left (or takes back from the largest).
	order := make([]int, len(w))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(frac[b], frac[a]) })
	for k := 0; left > 0; k = (k + 1) % len(w) {
		out[order[k]]++
		left--
	}
	for k := 0; left < 0; k = (k + 1) % len(w) {
		if out[order[k]] > 0 {
			out[order[k]]--
			left++
		}
	}
	return out
}

func checkLabelsPerClient(k int, sigma float64) error {
	if k < 1 {
		return fmt.Errorf("labels_per_client must be ≥ 1, got %d", k)
	}
	if !(sigma >= 0) || math.IsInf(sigma, 0) {
		return fmt.Errorf("labels_sigma must be a finite number ≥ 0, got %v", sigma)
	}
	return nil
}
