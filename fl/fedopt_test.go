package fl

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refAdaptive is Reddi et al. 2021 Algorithm 2 written as in the paper, on
// Δ_t = −g and in float64: m_t = β1 m + (1−β1)Δ, v_t per variant,
// x ← x + η m/(√v + τ), m₋₁ = 0, v₋₁ = τ².
func refAdaptive(kind string, lr, b1, b2, tau float64, x []float64, grads [][]float64) {
	m := make([]float64, len(x))
	v := make([]float64, len(x))
	for i := range v {
		v[i] = tau * tau
	}
	for _, g := range grads {
		for i := range x {
			d := -g[i]
			m[i] = b1*m[i] + (1-b1)*d
			switch kind {
			case "adagrad":
				v[i] = v[i] + d*d
			case "adam":
				v[i] = b2*v[i] + (1-b2)*d*d
			case "yogi":
				s := 0.0
				if v[i]-d*d > 0 {
					s = 1
				} else if v[i]-d*d < 0 {
					s = -1
				}
				v[i] = v[i] - (1-b2)*d*d*s
			}
			x[i] += lr * m[i] / (math.Sqrt(v[i]) + tau)
		}
	}
}

func TestAdaptiveMatchesAlgorithm2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const d, steps = 50, 20
	grads := make([][]float64, steps)
	for s := range grads {
		grads[s] = make([]float64, d)
		for i := range grads[s] {
			grads[s][i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(5)-3))
		}
	}
	for _, kind := range []string{"adagrad", "adam", "yogi"} {
		cfg := DefaultServerOptConfig()
		cfg.Name, cfg.LR = kind, 0.03
		opt, err := NewServerOptimizer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x32 := make([]float32, d)
		x64 := make([]float64, d)
		g32 := make([]float32, d)
		for _, g := range grads {
			for i := range g {
				g32[i] = float32(g[i])
			}
			opt.Step(x32, g32)
		}
		refAdaptive(kind, 0.03, 0.9, 0.99, 1e-3, x64, grads)
		for i := range x64 {
			if math.Abs(float64(x32[i])-x64[i]) > 1e-5*(1+math.Abs(x64[i])) {
				t.Fatalf("%s: x[%d] = %v, Algorithm 2 in float64 gives %v", kind, i, x32[i], x64[i])
			}
		}
	}
}

// One FedAdam step from v₋₁ = τ², m₋₁ = 0 in closed form: m = (1−β1)Δ,
// v = β2τ² + (1−β2)Δ², x₁ = x₀ + η·m/(√v + τ).
func TestAdamFirstStepClosedForm(t *testing.T) {
	opt, err := NewServerOptimizer(ServerOptConfig{Name: "adam", LR: 0.1, Beta1: 0.9, Beta2: 0.99, Tau: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1}
	opt.Step(x, []float32{-0.5}) // Δ = 0.5
	m := 0.1 * 0.5
	v := 0.99*1e-6 + 0.01*0.25
	want := 1 + 0.1*m/(math.Sqrt(v)+1e-3)
	if math.Abs(float64(x[0])-want) > 1e-6 {
		t.Fatalf("x₁ = %v, closed form %v", x[0], want)
	}
}

func TestMomentumZeroIsSGD(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := make([]float32, 33)
	b := make([]float32, 33)
	g := make([]float32, 33)
	sgd := &SGD{LR: 0.7}
	mom := &Momentum{LR: 0.7}
	for range 5 {
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		sgd.Step(a, g)
		mom.Step(b, g)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("β = 0: momentum %v, sgd %v at %d", b[i], a[i], i)
		}
	}
}

// Every server optimizer drives x to the minimum c of ½‖x − c‖² when fed
// its gradient x − c as the pseudo-gradient.
func TestServerOptimizersMinimizeQuadratic(t *testing.T) {
	c := []float32{1, -2, 0.5, 3}
	for _, name := range ServerOptimizerNames() {
		cfg := DefaultServerOptConfig()
		cfg.Name, cfg.LR = name, 0.1
		switch name {
		case "adam", "yogi":
			cfg.LR = 0.05
		case "adagrad": // steps shrink as Σg² grows
			cfg.LR = 0.5
		}
		opt, err := NewServerOptimizer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, len(c))
		g := make([]float32, len(c))
		for range 3000 {
			for i := range x {
				g[i] = x[i] - c[i]
			}
			opt.Step(x, g)
		}
		for i := range x {
			if math.Abs(float64(x[i]-c[i])) > 0.02 {
				t.Fatalf("%s: x = %v, want %v", name, x, c)
			}
		}
	}
}

// A job resumed from a checkpoint continues exactly: steps 1–3, state
// round trip, steps 4–5 equal steps 1–5 straight, bit for bit.
func TestServerOptimizerStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	grads := make([][]float32, 5)
	for s := range grads {
		grads[s] = make([]float32, 17)
		for i := range grads[s] {
			grads[s][i] = float32(rng.NormFloat64())
		}
	}
	for _, name := range ServerOptimizerNames() {
		cfg := DefaultServerOptConfig()
		cfg.Name = name
		straight, _ := NewServerOptimizer(cfg)
		first, _ := NewServerOptimizer(cfg)
		resumed, _ := NewServerOptimizer(cfg)
		a := make([]float32, 17)
		b := make([]float32, 17)
		for s, g := range grads {
			straight.Step(a, g)
			if s < 3 {
				first.Step(b, g)
				continue
			}
			if s == 3 {
				st, err := first.MarshalState()
				if err != nil {
					t.Fatal(err)
				}
				if err := resumed.UnmarshalState(st); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			resumed.Step(b, g)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: resumed %v, straight %v", name, b, a)
			}
		}
		if name != "sgd" {
			if err := resumed.UnmarshalState([]byte{1, 2, 3}); err == nil {
				t.Fatalf("%s: malformed state accepted", name)
			}
		}
	}
}

func TestServerOptConfigValidate(t *testing.T) {
	for _, c := range []ServerOptConfig{
		{Name: "sgd", LR: 0},
		{Name: "momentum", LR: 1, Momentum: 1},
		{Name: "adam", LR: 1, Beta1: -0.1, Beta2: 0.99, Tau: 1e-3},
		{Name: "yogi", LR: 1, Beta1: 0.9, Beta2: 1, Tau: 1e-3},
		{Name: "adagrad", LR: 1, Beta1: 0.9, Tau: 0},
	} {
		if _, err := NewServerOptimizer(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := NewServerOptimizer(ServerOptConfig{Name: "lamb", LR: 1}); err == nil {
		t.Error("unknown optimizer accepted")
	}
}
