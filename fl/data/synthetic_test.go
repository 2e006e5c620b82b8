package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// smallSynthetic has many small devices (n_k = ⌊e^0⌋ + 30 = 31, so 24
// train, 7 test), enough for statistics across devices in a few ms.
func smallSynthetic(alpha, beta float64, devices int, seed uint64) SyntheticConfig {
	return SyntheticConfig{
		Alpha: alpha, Beta: beta, Devices: devices,
		SizeMu: 0, SizeSigma: 0, MinSize: 30, TrainFraction: 0.8, Seed: seed,
	}
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, pcgStream)) }

func mustSynth(t *testing.T, cfg SyntheticConfig) *synthData {
	t.Helper()
	s, err := synthesize(cfg)
	if err != nil {
		t.Fatalf("synthesize(%+v): %v", cfg, err)
	}
	return s
}

// deviceRows returns device k's rows, train then test, as float64.
func deviceRows(s *synthData, k int) ([][]float64, []uint8) {
	var xs [][]float64
	var ys []uint8
	for _, part := range []struct {
		ds  *Dataset
		idx []int32
	}{{s.train, s.trainIdx[k]}, {s.test, s.testIdx[k]}} {
		for _, i := range part.idx {
			row := make([]float64, part.ds.Dim)
			for j := range row {
				row[j] = float64(part.ds.X[int(i)*part.ds.Dim+j])
			}
			xs = append(xs, row)
			ys = append(ys, part.ds.Y[i])
		}
	}
	return xs, ys
}

// Every label is the argmax of its own device's logits W_k x + b_k
// (recomputed here as 10 dot products), the devices' models differ (non-
// IID) and the labels are not degenerate.
func TestSyntheticLabelsAreDeviceArgmax(t *testing.T) {
	s := mustSynth(t, smallSynthetic(1, 1, 40, 1))
	hist := make([]int, SyntheticClasses)
	for k := range 40 {
		xs, ys := deviceRows(s, k)
		if len(xs) != 31 {
			t.Fatalf("device %d has %d rows, want 31", k, len(xs))
		}
		for i, x := range xs {
			best, arg := math.Inf(-1), -1
			for c := range SyntheticClasses {
				z := s.b[k][c]
				for j := range SyntheticDim {
					z += s.w[k][c*SyntheticDim+j] * x[j]
				}
				if z > best {
					best, arg = z, c
				}
			}
			if int(ys[i]) != arg {
				t.Fatalf("device %d row %d: label %d, argmax of its logits %d", k, i, ys[i], arg)
			}
			hist[ys[i]]++
		}
		if k > 0 && slices.Equal(s.w[k], s.w[0]) {
			t.Fatalf("devices 0 and %d share W in the non-IID setting", k)
		}
	}
	if distinct(hist) < 5 {
		t.Errorf("labels over 40 devices use only %d classes: %v", distinct(hist), hist)
	}
}

// Σ = diag(j^−1.2): the pooled squared deviations (x_j − v_kj)² over all
// devices' rows estimate Σ_jj; 5 standard errors (from the sample's own
// fourth moment) with 12,400 rows is about ±6%.
func TestSyntheticCovariance(t *testing.T) {
	s := mustSynth(t, smallSynthetic(0.5, 0.5, 400, 2))
	ms := make([]moments, SyntheticDim)
	for k := range 400 {
		xs, _ := deviceRows(s, k)
		for _, x := range xs {
			for j := range ms {
				d := x[j] - s.v[k][j]
				ms[j].add(d * d)
			}
		}
	}
	for j := range ms {
		mean, _, se, _ := ms[j].stats()
		want := math.Pow(float64(j+1), -1.2)
		if math.Abs(mean-want) > 5*se {
			t.Errorf("Σ_%d,%d ≈ %.5f ± %.5f, want %.5f", j+1, j+1, mean, se, want)
		}
	}
}

// The devices' heterogeneity matches its definition, in closed form:
//
//   - a_k, the mean of the 610 entries of W_k and b_k, is u_k + N(0, 1/610),
//     so Var_k(a_k) = α + 1/610;
//   - s²_k, the sample variance (over the 60 coordinates j, divisor 59) of
//     device k's per-coordinate feature means x̄_kj = v_kj + N(0, Σ_jj/n_k),
//     has expectation 1 + (Σ_j Σ_jj/60)/n_k (v_kj ~ N(B_k, 1));
//   - m_k, the mean of device k's features over its rows and the 60
//     coordinates, is B_k + N(0, 1/60) + N(0, Σ_j Σ_jj/(60²·n_k)), so
//     Var_k(m_k) = β + 1/60 + Σ_j Σ_jj/(3600·31);
//
// with α, β read as variances (or as standard deviations, squared, under
// StdDevParams). The tolerance is 5 standard errors of the sample variance
// over 400 devices (≈ 35%), which separates β = 0, 0.25 and 0.5.
func TestSyntheticHeterogeneity(t *testing.T) {
	var trΣ float64
	for j := 1; j <= SyntheticDim; j++ {
		trΣ += math.Pow(float64(j), -1.2)
	}
	for _, c := range []struct {
		alpha, beta float64
		stdDev      bool
		wantA       float64 // variance of u_k
		wantB       float64 // variance of B_k
	}{
		{0, 0, false, 0, 0},
		{0.5, 0.5, false, 0.5, 0.5},
		{0.5, 0.5, true, 0.25, 0.25},
		{1, 4, false, 1, 4},
	} {
		cfg := smallSynthetic(c.alpha, c.beta, 400, 3)
		cfg.StdDevParams = c.stdDev
		s := mustSynth(t, cfg)
		var a, m, sv moments
		for k := range 400 {
			var sum float64
			for _, w := range append(slices.Clone(s.w[k]), s.b[k]...) {
				sum += w
			}
			a.add(sum / 610)
			xs, _ := deviceRows(s, k)
			sum = 0
			for _, x := range xs {
				for _, v := range x {
					sum += v
				}
			}
			m.add(sum / float64(len(xs)*SyntheticDim))
			var col moments
			for j := range SyntheticDim {
				var cs float64
				for _, x := range xs {
					cs += x[j]
				}
				col.add(cs / float64(len(xs)))
			}
			_, v, _, _ := col.stats()
			sv.add(v * 60 / 59)
		}
		if mean, _, se, _ := sv.stats(); math.Abs(mean-(1+trΣ/60/31)) > 5*se {
			t.Errorf("α=%v β=%v: within-device spread of v_k: E s² ≈ %.4f ± %.4f, want %.4f", c.alpha, c.beta, mean, se, 1+trΣ/60/31)
		}
		for _, st := range []struct {
			name string
			m    *moments
			want float64
		}{
			{"Var(mean of W_k, b_k)", &a, c.wantA + 1.0/610},
			{"Var(mean feature of device k)", &m, c.wantB + 1.0/60 + trΣ/(3600*31)},
		} {
			mean, v, seMean, seVar := st.m.stats()
			if math.Abs(v-st.want) > 5*seVar || math.Abs(mean) > 5*seMean+1e-12 {
				t.Errorf("α=%v β=%v stddev=%v: %s = %.4f ± %.4f (mean %.4f ± %.4f), want %.4f around 0",
					c.alpha, c.beta, c.stdDev, st.name, v, seVar, mean, seMean, st.want)
			}
		}
	}
}

// Synthetic-IID: one W, b for all devices, v_k = 0, so every feature's
// pooled mean is 0 within 5 standard errors; α and β are ignored.
func TestSyntheticIID(t *testing.T) {
	cfg := smallSynthetic(1, 1, 100, 4)
	cfg.IID = true
	s := mustSynth(t, cfg)
	for k := range 100 {
		if !slices.Equal(s.w[k], s.w[0]) || !slices.Equal(s.b[k], s.b[0]) {
			t.Fatalf("device %d has its own model in the IID setting", k)
		}
		if slices.ContainsFunc(s.v[k], func(v float64) bool { return v != 0 }) {
			t.Fatalf("device %d has v ≠ 0", k)
		}
	}
	ms := make([]moments, SyntheticDim)
	for k := range 100 {
		xs, _ := deviceRows(s, k)
		for _, x := range xs {
			for j := range ms {
				ms[j].add(x[j])
			}
		}
	}
	for j := range ms {
		if mean, _, se, _ := ms[j].stats(); math.Abs(mean) > 5*se {
			t.Errorf("feature %d: pooled mean %.4f ± %.4f, want 0", j, mean, se)
		}
	}
}

// The exported populations: device k is client k of train and of test,
// with ⌊0.8·n_k⌋ and the rest of its examples; same seed, same data.
func TestSyntheticPopulations(t *testing.T) {
	cfg := FedProxSynthetic(0.5, 0.5)
	cfg.Seed = 5
	train, test, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := mustSynth(t, cfg)
	if train.NumClients() != 30 || test.NumClients() != 30 {
		t.Fatalf("%d train and %d test clients, want 30", train.NumClients(), test.NumClients())
	}
	for _, ds := range []*Dataset{train.Base(), test.Base()} {
		if err := ds.Validate(); err != nil || ds.Dim != 60 || ds.Classes != 10 {
			t.Fatalf("dataset dim %d classes %d: %v", ds.Dim, ds.Classes, err)
		}
	}
	total := 0
	for k, n := range s.sizes {
		if n < 50 {
			t.Errorf("device %d has %d < 50 examples", k, n)
		}
		wantTrain := n * 8 / 10
		if got := train.ClientSize(k); got != wantTrain || len(train.Client(k).HeldOut) != 0 {
			t.Errorf("device %d: %d train examples of %d, want %d", k, got, n, wantTrain)
		}
		if got := test.ClientSize(k); got != n-wantTrain {
			t.Errorf("device %d: %d test examples of %d, want %d", k, got, n, n-wantTrain)
		}
		// Client k's examples are device k's rows (in shuffled order).
		got := slices.Sorted(slices.Values(train.Client(k).Train))
		if !slices.Equal(got, s.trainIdx[k]) {
			t.Fatalf("train client %d holds %v, want device %d's rows %v", k, got, k, s.trainIdx[k])
		}
		total += n
	}
	if train.TotalExamples()+test.TotalExamples() != total {
		t.Errorf("%d + %d examples, sizes total %d", train.TotalExamples(), test.TotalExamples(), total)
	}
	train2, test2, _ := Synthetic(cfg)
	if !slices.Equal(train.Base().X, train2.Base().X) || !slices.Equal(test.Base().Y, test2.Base().Y) ||
		!slices.Equal(train.Client(3).Train, train2.Client(3).Train) {
		t.Error("same config, different data")
	}
	cfg.Seed = 6
	train3, _, _ := Synthetic(cfg)
	if slices.Equal(train.Base().X[:60], train3.Base().X[:60]) {
		t.Error("seeds 5 and 6 give the same first row")
	}
	cfg.HeldOutFraction = 0.25
	train4, _, err := Synthetic(cfg)
	if m := len(allIdx(train4.Client(0))); err != nil || m != train3.ClientSize(0) || len(train4.Client(0).HeldOut) != m/4 {
		t.Errorf("held_out_fraction 0.25: client 0 holds out %d of %d (%v)", len(train4.Client(0).HeldOut), m, err)
	}
}

// Sizes are ⌊exp(4 + 2z)⌋ + 50, z ~ N(0, 1): P(n − 50 ≥ t) = P(z ≥ (ln t −
// 4)/2) for integers t ≥ 1, checked at the median (t = 55), the mean of
// the lognormal (≈ e^6) and far out (e^8), within 5 binomial standard
// errors over 20,000 devices; the tail is heavy (max/median > 100).
func TestSyntheticSizes(t *testing.T) {
	cfg := FedProxSynthetic(0, 0)
	cfg.Devices = 20000
	sizes, err := syntheticSizes(cfg, newRNG(7))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []float64{55, 403, 2981} {
		p := 0.5 * math.Erfc((math.Log(tt)-4)/2/math.Sqrt2)
		k := 0
		for _, n := range sizes {
			if n-50 >= int(tt) {
				k++
			}
		}
		got, se := float64(k)/20000, math.Sqrt(p*(1-p)/20000)
		if math.Abs(got-p) > 5*se {
			t.Errorf("P(n − 50 ≥ %v) = %.4f, want %.4f ± %.4f", tt, got, p, se)
		}
	}
	sorted := slices.Sorted(slices.Values(sizes))
	if sorted[0] < 50 || sorted[len(sorted)-1] < 100*sorted[len(sorted)/2] {
		t.Errorf("sizes: min %d, median %d, max %d; want min ≥ 50 and a heavy tail", sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1])
	}
}

func TestSyntheticErrors(t *testing.T) {
	ok := smallSynthetic(0, 0, 3, 1)
	for _, c := range []struct {
		mod  func(*SyntheticConfig)
		want string
	}{
		{func(c *SyntheticConfig) { c.Alpha = -1 }, "alpha"},
		{func(c *SyntheticConfig) { c.Alpha = math.Inf(1) }, "alpha"},
		{func(c *SyntheticConfig) { c.Beta = math.NaN() }, "beta"},
		{func(c *SyntheticConfig) { c.Devices = 0 }, "devices"},
		{func(c *SyntheticConfig) { c.Devices = MaxClients + 1 }, "devices"},
		{func(c *SyntheticConfig) { c.SizeMu = math.NaN() }, "size_mu"},
		{func(c *SyntheticConfig) { c.SizeSigma = -0.1 }, "size_sigma"},
		{func(c *SyntheticConfig) { c.MinSize = 0 }, "min_size"},
		{func(c *SyntheticConfig) { c.TrainFraction = 1 }, "train_fraction"},
		{func(c *SyntheticConfig) { c.TrainFraction = 0 }, "train_fraction"},
		{func(c *SyntheticConfig) { c.HeldOutFraction = 1 }, "held_out_fraction"},
		{func(c *SyntheticConfig) { c.SizeMu = 30 }, "sizes total more than"},
		{func(c *SyntheticConfig) { c.Devices = 1 << 20 }, "sizes total more than"},
	} {
		cfg := ok
		c.mod(&cfg)
		if _, _, err := Synthetic(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", cfg, err, c.want)
		}
	}
	if _, _, err := Synthetic(ok); err != nil {
		t.Errorf("valid config: %v", err)
	}
}
