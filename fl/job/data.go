package job

import (
	"fmt"

	"github.com/dpfl/dpfl/fl/data"
)

// population builds the job's federated training data and the test split
// its model is scored on. Devices keep their own data, so a devices job
// has no population (nil) and is scored on Fashion-MNIST's test split.
func (m *Manager) population(spec Spec) (*data.Federated, *data.Dataset, error) {
	switch spec.Dataset {
	case "leaf":
		train, test, _, err := data.LoadLEAF(spec.LEAF.TrainDir, spec.LEAF.TestDir, data.LEAFOptions{
			Classes: spec.LEAF.Classes, HeldOutFraction: spec.Population.HeldOutFraction, Seed: spec.Seed,
		})
		if err != nil {
			return nil, nil, err
		}
		return train, test.Base(), nil
	case "synthetic":
		cfg := data.FedProxSynthetic(spec.Synthetic.Alpha, spec.Synthetic.Beta)
		cfg.IID, cfg.Devices, cfg.Seed = spec.Synthetic.IID, spec.Population.Clients, spec.Seed
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
	pp := spec.Population
	part, err := data.ParsePartitionerParams(pp.Partition, data.PartitionParams{
		DirichletAlpha: pp.DirichletAlpha, ShardsPerClient: pp.ShardsPerClient,
		LabelsPerClient: pp.LabelsPerClient, LabelsSigma: pp.LabelsSigma,
	})
	if err != nil {
		return nil, nil, err
	}
	fed, err := data.NewFederated(ds.train, data.Options{
		NumClients: spec.Population.Clients, Partitioner: part, Seed: spec.Seed,
		HeldOutFraction: spec.Population.HeldOutFraction,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("partitioning: %w", err)
	}
	return fed, ds.test, nil
}
