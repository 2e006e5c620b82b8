package job

import (
	"slices"
	"strings"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
)

// validateClient checks client: local training (fl.ClientConfig) and
// the simulated stragglers.
func validateClient(e *fieldErrs, c types.ClientSpec) {
	e.rng("client.epochs", float64(c.Epochs))
	e.rng("client.batch_size", float64(c.BatchSize))
	e.rng("client.lr", c.LR)
	validateSchedule(e, "client.lr_schedule", c.LRSchedule)
	e.rng("client.momentum", c.Momentum)
	e.rng("client.prox_mu", c.ProxMu)
	e.rng("client.stragglers", c.Stragglers)
}

// validateServer checks server: the optimizer (fl.ServerOptConfig) and
// its parameters, those of the adaptive optimizers only for them.
func validateServer(e *fieldErrs, s types.ServerSpec) {
	if !slices.Contains(fl.ServerOptimizerNames(), s.Optimizer) {
		e.addf("server.optimizer", types.RuleOneOf, "unknown optimizer %q (known: %s)", s.Optimizer, strings.Join(fl.ServerOptimizerNames(), ", "))
	}
	e.rng("server.lr", s.LR)
	validateSchedule(e, "server.lr_schedule", s.LRSchedule)
	adaptive := s.Optimizer == "adagrad" || s.Optimizer == "adam" || s.Optimizer == "yogi"
	if s.Optimizer == "momentum" {
		e.rng("server.momentum", s.Momentum)
	}
	if adaptive {
		e.rng("server.beta1", s.Beta1)
	}
	if s.Optimizer == "adam" || s.Optimizer == "yogi" {
		e.rng("server.beta2", s.Beta2)
	}
	if adaptive {
		e.rng("server.tau", s.Tau)
	}
}

// validateSchedule checks a learning-rate schedule (fl.Schedule) at
// field.
func validateSchedule(e *fieldErrs, field string, s types.Schedule) {
	switch s.Kind {
	case "", "constant", "cosine":
	case "exp_decay":
		e.rng(field+".decay_rate", s.DecayRate, "lr_schedule.decay_rate")
		e.rng(field+".decay_every", float64(s.DecayEvery), "lr_schedule.decay_every")
	default:
		e.addf(field+".kind", types.RuleOneOf, "unknown schedule %q (known: constant, exp_decay, cosine)", s.Kind)
	}
}

// validateAlgorithm checks algorithm: SCAFFOLD and FedNova are
// cross-silo algorithms, without DP and with simulated clients only.
func validateAlgorithm(e *fieldErrs, s types.Spec) {
	switch s.Algorithm {
	case "fedavg", "":
	case "scaffold", "fednova":
		switch {
		case s.DP.Enabled && s.Algorithm == "scaffold":
			e.addf("algorithm", types.RuleConflict, "scaffold cannot run with DP: every client's control variate c_i and the server's c are functions of the clients' data that the server receives unclipped and without noise, outside DP-FedAvg's analysis; set dp.enabled false (cross-silo)")
		case s.DP.Enabled:
			e.addf("algorithm", types.RuleConflict, "fednova cannot run with DP: it weights each update by the client's number of local steps, so one user's contribution is no longer bounded by the clip norm; set dp.enabled false (cross-silo)")
		}
		if s.SecureAggregation || s.Population.Source == "devices" {
			e.addf("algorithm", types.RuleConflict, "%s needs per-client state or step counts on the server; it runs only with simulated clients and without secure_aggregation", s.Algorithm)
		}
	default:
		e.addf("algorithm", types.RuleOneOf, "unknown algorithm %q (known: fedavg, scaffold, fednova)", s.Algorithm)
	}
}
