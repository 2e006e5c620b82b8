package fl

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/secagg"
)

// The Field Guide's worked numbers: a client of 100 examples, E = 1, at
// 0.127 s per example simulates for 12.7 s, so R_comp·T_sim + C_comp =
// 7·12.7 + 10 = 98.9 s; a 1 MB model adds 1e6/0.75e6 + 1e6/0.25e6 =
// 5.333 s of communication.
func TestRoundTimeByHand(t *testing.T) {
	m := DefaultRoundTimeModel()
	dev := DeviceTime{SimSeconds: 100 * 0.127, Bandwidth: 1, Compute: 1}
	if got := m.ClientSeconds(0, 0, dev); math.Abs(got-98.9) > 1e-9 {
		t.Fatalf("client compute time %v s, by hand 98.9 s", got)
	}
	got := m.RoundSeconds(1e6, 1e6, []DeviceTime{dev, {SimSeconds: 1, Bandwidth: 1, Compute: 1}}, 2)
	if want := 1e6/0.75e6 + 1e6/0.25e6 + 98.9 + 2; math.Abs(got-want) > 1e-9 {
		t.Fatalf("round time %v s, by hand %v s (slowest device plus T_server)", got, want)
	}
	if got := m.RoundSeconds(1e6, 1e6, nil, 2); got != 2 {
		t.Fatalf("no reporting device: %v s, want T_server = 2", got)
	}
}

// Device factors are log-normal: log-factor mean 0 and standard deviation
// σ within tolerance; σ = 0 gives factor 1 exactly.
func TestDeviceFactors(t *testing.T) {
	m := DefaultRoundTimeModel()
	if d := m.Device(3, rand.New(rand.NewPCG(1, 1))); d.Bandwidth != 1 || d.Compute != 1 || d.SimSeconds != 3 {
		t.Fatalf("identical devices: %+v", d)
	}
	m.BandwidthSigma, m.ComputeSigma = 0.5, 1
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 20000
	var sb, sb2, sc, sc2 float64
	for range n {
		d := m.Device(1, rng)
		lb, lc := math.Log(d.Bandwidth), math.Log(d.Compute)
		sb, sb2, sc, sc2 = sb+lb, sb2+lb*lb, sc+lc, sc2+lc*lc
	}
	for _, c := range []struct{ s, s2, sigma float64 }{{sb, sb2, 0.5}, {sc, sc2, 1}} {
		mean := c.s / n
		sd := math.Sqrt(c.s2/n - mean*mean)
		if math.Abs(mean) > 5*c.sigma/math.Sqrt(n) || math.Abs(sd-c.sigma) > 0.03*c.sigma {
			t.Fatalf("σ = %v: log-factor mean %v, sd %v", c.sigma, mean, sd)
		}
	}
	for _, bad := range []RoundTimeModel{{}, {DownBandwidth: 1, UpBandwidth: 1, ComputeRatio: -1}, {DownBandwidth: 1, UpBandwidth: 1, BandwidthSigma: 9}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// A simulated round reports the model's estimate: without the compute term
// (R_comp = 0) it is the communication of the float32 model plus C_comp
// plus the (small, measured) server time.
func TestRoundEstimate(t *testing.T) {
	ds := blobs(200, 9)
	fed := population(t, ds, 10)
	m, _ := model.New("logreg", 784, 10)
	rt := DefaultRoundTimeModel()
	rt.ComputeRatio = 0
	alg := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}},
		Aggregate: WeightedMean{}, Seed: 1, Simulation: Simulation{RoundTime: &rt}}
	params := make([]float32, m.NumParams())
	st, err := alg.Round(t.Context(), 1, params, fed, []int{1, 2, 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	bytes := 4 * float64(m.NumParams())
	floor := bytes/0.75e6 + bytes/0.25e6 + 10
	if !(st.EstimatedSeconds >= floor && st.EstimatedSeconds < floor+1) {
		t.Fatalf("estimate %v s, want %v s plus the server's time", st.EstimatedSeconds, floor)
	}
}

// Under secure aggregation a client uploads the protocol's traffic, not
// its d float32s: with a 1 byte/s uplink and nothing else slow, the
// estimate is that traffic in seconds (plus the server's time, < 1 s).
func TestRoundEstimateUploadsTheSecureAggregationTraffic(t *testing.T) {
	ds := blobs(200, 9)
	fed := population(t, ds, 10)
	m, _ := model.New("logreg", 784, 10)
	rt := RoundTimeModel{DownBandwidth: 1e15, UpBandwidth: 1}
	agg := &SecureAggregator{Params: dp.Params{ClipNorm: 1}, MinClients: 2, Rand: rand.New(rand.NewPCG(1, 2)), Workers: 1}
	alg := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}},
		Aggregate: agg, Seed: 1, Simulation: Simulation{RoundTime: &rt}}
	st, err := alg.Round(t.Context(), 1, make([]float32, m.NumParams()), fed, []int{1, 2, 3, 4}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if st.SecAgg == nil {
		t.Fatal("no secure aggregation instance ran")
	}
	d := m.NumParams()
	sent := float64(secagg.ClientTraffic(st.SecAgg.Neighbors, d).Sent)
	if sent <= 4*float64(d) {
		t.Fatalf("protocol traffic %v bytes, not more than the plain upload %d: the test cannot tell them apart", sent, 4*d)
	}
	if !(st.EstimatedSeconds >= sent && st.EstimatedSeconds < sent+1) {
		t.Fatalf("estimate %v s, want the protocol's %v bytes at 1 byte/s", st.EstimatedSeconds, sent)
	}
}
