package job

import (
	"math"
	"slices"
	"strings"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// validateDataset checks dataset and its section (synthetic, leaf). It
// returns the number of training examples users are carved from:
// trainSize for fashion-mnist, unbounded for data generated per user or
// read per user.
func validateDataset(e *fieldErrs, s types.Spec, trainSize int) int {
	devices := s.Population.Source == "devices"
	switch s.Dataset {
	case "fashion-mnist":
		return trainSize
	case "synthetic":
		e.rng("synthetic.alpha", s.Synthetic.Alpha)
		e.rng("synthetic.beta", s.Synthetic.Beta)
		if s.Population.Size > MaxSyntheticDevices {
			e.addf("population.size", types.RuleRange, "is the number of synthetic devices, at most %d, got %d", MaxSyntheticDevices, s.Population.Size)
		}
		if devices {
			e.addf("dataset", types.RuleConflict, "synthetic data lives on the server; devices bring their own data")
		}
	case "leaf":
		validateLEAFDir(e, "leaf.train_dir", s.LEAF.TrainDir, "is required with dataset leaf")
		validateLEAFDir(e, "leaf.test_dir", s.LEAF.TestDir, "is required with dataset leaf: the model is scored on it")
		e.rng("leaf.classes", float64(s.LEAF.Classes))
		if devices {
			e.addf("dataset", types.RuleConflict, "leaf data lives on the server; devices bring their own data")
		}
	default:
		e.addf("dataset", types.RuleOneOf, "unknown dataset %q (known: fashion-mnist, synthetic, leaf)", s.Dataset)
		return trainSize
	}
	return math.MaxInt // devices are generated, or the files' users are the population
}

// validateLEAFDir checks a LEAF directory (data.CheckLEAFDir).
func validateLEAFDir(e *fieldErrs, field, dir, required string) {
	if dir == "" {
		e.addf(field, types.RuleRequired, "%s", required)
		return
	}
	if err := data.CheckLEAFDir(dir); err != nil {
		e.addf(field, types.RuleFormat, "%v", err)
	}
}

// validateModel checks model.
func validateModel(e *fieldErrs, s types.Spec) {
	if !slices.Contains(model.Names(), s.Model) {
		e.addf("model", types.RuleOneOf, "unknown model %q (known: %s)", s.Model, strings.Join(model.Names(), ", "))
	}
}

// validatePopulation checks population over trainSize training examples
// (validateDataset's).
func validatePopulation(e *fieldErrs, s types.Spec, trainSize int) {
	p := s.Population
	if p.OnDemand {
		validateOnDemand(e, s)
		trainSize = math.MaxInt // users share examples when they outnumber them
	}
	if p.Source != "simulated" && p.Source != "devices" {
		e.addf("population.source", types.RuleOneOf, "unknown source %q (known: simulated, devices)", p.Source)
	}
	e.rng("population.size", float64(p.Size))
	if p.Size <= MaxClients && p.Size > trainSize {
		e.addf("population.size", types.RuleCapacity, "must not exceed the %d training examples, got %d", trainSize, p.Size)
	}
	switch p.Partition {
	case "iid":
	case "labels":
		e.rng("population.labels_per_client", float64(p.LabelsPerClient))
		e.rng("population.labels_sigma", p.LabelsSigma)
	case "dirichlet":
		if !p.OnDemand {
			e.rng("population.dirichlet_alpha", p.DirichletAlpha)
		}
	case "shards":
		e.rng("population.shards_per_client", float64(p.ShardsPerClient))
		if p.ShardsPerClient >= 1 && float64(p.Size)*float64(p.ShardsPerClient) > float64(trainSize) {
			e.addf("population.shards_per_client", types.RuleCapacity, "size × shards_per_client must be at most the %d training examples, got %d × %d", trainSize, p.Size, p.ShardsPerClient)
		}
	default:
		e.addf("population.partition", types.RuleOneOf, "unknown partition %q (known: iid, dirichlet, shards, labels)", p.Partition)
	}
	e.rng("population.held_out_fraction", p.HeldOutFraction)
}

// validateOnDemand checks an on-demand population (population.on_demand).
func validateOnDemand(e *fieldErrs, s types.Spec) {
	p := s.Population
	if s.Dataset != "fashion-mnist" || p.Source == "devices" {
		e.addf("population.on_demand", types.RuleConflict, "derives users from the fashion-mnist training set for simulated jobs only")
	}
	if s.Algorithm == "scaffold" {
		e.addf("population.on_demand", types.RuleConflict, "cannot keep SCAFFOLD's per-client control variates for a population derived on demand")
	}
	e.rng("population.dirichlet_alpha", p.DirichletAlpha, "population.dirichlet_alpha/on_demand")
	e.rng("population.size_mu", p.SizeMu)
	e.rng("population.size_sigma", p.SizeSigma)
	e.rng("population.max_examples", float64(p.MaxExamples))
	e.rng("population.eval_user_fraction", p.EvalUserFraction)
}

// validateSampling checks sampling against population.size.
func validateSampling(e *fieldErrs, s types.Spec) {
	switch c := s.Sampling; c.Scheme {
	case "poisson":
		if fe := checkRange("sampling.rate", c.Rate); fe != nil {
			e.add(fe)
			return
		}
		e.err(checkExpectedCohort(s))
	case "fixed":
		if n := s.Population.Size; c.CohortSize < 1 || c.CohortSize > n {
			e.addf("sampling.cohort_size", types.RuleRange, "must be in [1, population.size = %d], got %d", n, c.CohortSize)
		}
	default:
		e.addf("sampling.scheme", types.RuleOneOf, "unknown scheme %q (known: poisson, fixed)", c.Scheme)
	}
}
