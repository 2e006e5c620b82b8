package fl

// ServerUpdate is the server step of a round, the same for simulated
// clients (FedAvg.Round) and real devices: x_{t+1} = ServerOpt(x_t, −Δ_t,
// η_s(t), t), the last line of the round loop of Reddi et al. 2021,
// "Adaptive Federated Optimization", Algorithm 2 (and of Wang et al. 2021,
// Algorithm 1), where Δ_t is the released average of the clients' deltas.
// Not safe for concurrent use; the zero value needs an Optimizer.
type ServerUpdate struct {
	// Optimizer applies the pseudo-gradient and keeps its own state.
	Optimizer ServerOptimizer
	// LR is the base server learning rate η_s; Schedule decays it over the
	// Rounds of the job (T). With a constant (or empty) Schedule the
	// optimizer's own learning rate is left as it is.
	LR       float64
	Schedule Schedule
	Rounds   int

	pseudo []float32
}

// Apply updates params in place from avg (Δ_t, the same length) in round
// (1-based): it sets η_s = LR·Schedule.Factor(round, Rounds) when the
// schedule is not constant, forms the pseudo-gradient g_t = −Δ_t and calls
// Optimizer.Step(params, g_t).
func (s *ServerUpdate) Apply(params, avg []float32, round int) {
	if k := s.Schedule.Kind; k != "" && k != "constant" {
		s.Optimizer.SetLR(float32(s.LR * s.Schedule.Factor(round, s.Rounds)))
	}
	if len(s.pseudo) != len(avg) {
		s.pseudo = make([]float32, len(avg))
	}
	for i, v := range avg {
		s.pseudo[i] = -v
	}
	s.Optimizer.Step(params, s.pseudo)
}
