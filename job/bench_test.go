package job

import (
	"math"
	"testing"

	"github.com/dpfl/dpfl/api/types"
)

// BenchmarkMillionUsers is issue 7's scale target: a 1,000,000-user
// on-demand population from Fashion-MNIST, Poisson q = 0.001 (about 1,000
// users a round), logistic regression, DP, 50 rounds. Run it with
//
//	go test -run '^$' -bench MillionUsers -benchtime 1x -cpuprofile cpu.out ./job
//
// under /usr/bin/time -v for the peak RSS (target ≤ 2 GB); the profile
// shows where a round's time goes. It reports rounds/s and the final test
// accuracy.
func BenchmarkMillionUsers(b *testing.B) {
	m := realManager(b)
	for b.Loop() {
		s := DefaultSpec()
		s.Population = types.PopulationSpec{Source: "simulated", Size: 1_000_000, Partition: "dirichlet", DirichletAlpha: 1,
			OnDemand: true, SizeMu: math.Log(20), SizeSigma: 1, MaxExamples: 500, EvalUserFraction: 0.01}
		s.Sampling.Rate = 0.001
		s.Rounds = 50
		s.EvalEvery = 25
		s.DP.Delta = 1e-7
		st := runToEnd(b, m, s)
		if st.State != types.StateCompleted {
			b.Fatalf("%s: %s", st.State, st.Message)
		}
		b.ReportMetric(float64(s.Rounds)/b.Elapsed().Seconds(), "rounds/s")
		b.ReportMetric(st.LatestTest.Test.Accuracy, "test-accuracy")
	}
}
