package job

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
)

// population builds the job's federated training data and the test split
// its model is scored on. Devices keep their own data, so a devices job
// has no population (nil) and is scored on Fashion-MNIST's test split.
func (m *Manager) population(spec types.Spec) (data.Population, *data.Dataset, error) {
	switch spec.Dataset {
	case "leaf":
		train, test, err := m.loadLEAF(spec, time.Time{})
		if err != nil {
			return nil, nil, err
		}
		return train, test.Base(), nil
	case "synthetic":
		cfg := data.FedProxSynthetic(spec.Synthetic.Alpha, spec.Synthetic.Beta)
		cfg.IID, cfg.Devices, cfg.Seed = spec.Synthetic.IID, spec.Population.Size, spec.Seed
		cfg.HeldOutFraction = spec.Population.HeldOutFraction
		train, test, err := data.Synthetic(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("generating synthetic data: %w", err)
		}
		return train, test.Base(), nil
	}
	ds, err := m.dataset()
	if err != nil {
		return nil, nil, err
	}
	if spec.Population.Source == "devices" {
		return nil, ds.test, nil
	}
	if spec.Population.OnDemand {
		pop, err := data.NewOnDemand(ds.train, onDemandOptions(spec.Population, spec.Seed))
		if err != nil {
			return nil, nil, err
		}
		return pop, ds.test, nil
	}
	pp := spec.Population
	part, err := data.ParsePartitionerParams(pp.Partition, data.PartitionParams{
		DirichletAlpha: pp.DirichletAlpha, ShardsPerClient: pp.ShardsPerClient,
		LabelsPerClient: pp.LabelsPerClient, LabelsSigma: pp.LabelsSigma,
	})
	if err != nil {
		return nil, nil, err
	}
	fed, err := data.NewFederated(ds.train, data.Options{
		NumClients: spec.Population.Size, Partitioner: part, Seed: spec.Seed,
		HeldOutFraction: spec.Population.HeldOutFraction,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("partitioning: %w", err)
	}
	return fed, ds.test, nil
}

// evalUsers are up to max users of an on-demand population that never
// train, found by scanning ids from 0 (expected max/fraction ids).
func evalUsers(pop *data.OnDemand, max int) []int {
	var ids []int
	for id := 0; id < pop.NumClients() && len(ids) < max && pop.Options().EvalUserFraction > 0; id++ {
		if pop.IsEvalUser(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// trainingUsers removes the eval users from a sampled cohort: they never
// train, and dropping a sampled user only removes a contribution.
func trainingUsers(pop data.Population, cohort []int) []int {
	od, ok := pop.(*data.OnDemand)
	if !ok || od.Options().EvalUserFraction == 0 {
		return cohort
	}
	out := cohort[:0]
	for _, u := range cohort {
		if !od.IsEvalUser(u) {
			out = append(out, u)
		}
	}
	return out
}

// dataNotes are facts about the population that qualify its privacy.
// Every status read computes them, so they come from closed forms
// (data.OnDemandExpectedSize), never from building the population.
func (m *Manager) dataNotes(spec types.Spec) []string {
	if !spec.Population.OnDemand {
		return nil
	}
	ds, err := m.dataset()
	if err != nil {
		return nil
	}
	n, size := spec.Population.Size, data.OnDemandExpectedSize(onDemandOptions(spec.Population, spec.Seed))
	held := float64(n) * size / float64(ds.train.Len())
	if held > 1 { // OnDemand.RepeatsExamples
		return []string{fmt.Sprintf("the %d users hold about %.0f examples each drawn from %d training examples, so examples repeat across users "+
			"(each is held by about %.1f users): user-level DP protects each user, and an example held by k users only at group level k",
			n, size, ds.train.Len(), held)}
	}
	return []string{fmt.Sprintf("users of an on-demand population draw their examples independently, so an example may be held by more than one user "+
		"(about %.2f users per example on average) and is then protected only at group level; population.on_demand false gives every example to one user", held)}
}

// errNoDataRoot refuses LEAF jobs on a server started without a data
// root: without one, a spec would name any path on the server.
var errNoDataRoot = errors.New("the server has no --data-root; leaf datasets are disabled")

// errDataRoot is what a client learns when the data root cannot be
// opened: the server's own path and error are for its log.
var errDataRoot = errors.New("leaf: the server's data root cannot be opened; see the server log")

// loadLEAF reads the job's LEAF directories, relative to the data root
// and through an os.Root, so that a spec reads nothing outside it. test
// is never nil: a spec without leaf.test_dir is refused at validation.
func (m *Manager) loadLEAF(spec types.Spec, deadline time.Time) (train, test *data.Federated, err error) {
	if m.limits.DataRoot == "" {
		return nil, nil, errNoDataRoot
	}
	if spec.LEAF.TestDir == "" { // Validate refuses it; test is scored on
		return nil, nil, NewValidationError("leaf.test_dir", types.RuleRequired, "is required with dataset leaf")
	}
	root, err := os.OpenRoot(m.limits.DataRoot)
	if err != nil {
		m.log.Error("opening the data root", "err", err)
		return nil, nil, errDataRoot
	}
	defer root.Close()
	train, test, _, err = data.LoadLEAF(root, spec.LEAF.TrainDir, spec.LEAF.TestDir, data.LEAFOptions{
		Classes: spec.LEAF.Classes, HeldOutFraction: spec.Population.HeldOutFraction, Seed: spec.Seed,
		Deadline: deadline,
	})
	return train, test, err
}

// leafSubmitTimeout bounds the reading of a LEAF dataset at submission,
// inside the POST request: FEMNIST's 36 training files (about 1 GB of
// JSON) parse in well under a minute on two cores, and the HTTP server's
// write timeout is 3 minutes. A slower dataset is refused (400) rather
// than holding the request.
const leafSubmitTimeout = 60 * time.Second

// leafRefusal is the error Submit returns for a LEAF dataset that cannot
// be loaded: a *ValidationError on the field at fault, except where the
// fault is the server's own (its data root cannot be opened).
func leafRefusal(err error) error {
	var le *data.LEAFError
	var ve *ValidationError
	switch {
	case errors.As(err, &ve):
		return ve
	case errors.Is(err, errDataRoot):
		return err
	case errors.Is(err, errNoDataRoot):
		return NewValidationError("dataset", types.RuleCapacity, err.Error())
	case errors.Is(err, data.ErrLEAFDeadline):
		return NewValidationError("leaf.train_dir", types.RuleCapacity, fmt.Sprintf("the dataset could not be read within %v at submission; use fewer or smaller files", leafSubmitTimeout))
	case errors.As(err, &le):
		field := "leaf.train_dir"
		if le.Test {
			field = "leaf.test_dir"
		}
		return NewValidationError(field, types.RuleFormat, le.Path+": "+le.Reason)
	}
	return NewValidationError("leaf", types.RuleFormat, err.Error())
}
