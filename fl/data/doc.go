// Package data is dpfl's federated data layer, in the spirit of FedJAX's
// federated datasets (client id → client dataset).
//
//   - Dataset holds labelled examples: rows of float32 features (pixels/255
//     in [0, 1] for images) and uint8 labels.
//   - ReadIDX and LoadIDXPair read LeCun's IDX format (MNIST, and
//     Fashion-MNIST of Xiao, Rasul, Vollgraf 2017); LoadFashionMNIST reads
//     the four files that Debian's dataset-fashion-mnist package installs.
//   - LoadLEAF reads LEAF's JSON federated datasets (Caldas et al. 2018)
//     with numeric features, such as FEMNIST: users become clients.
//   - Synthetic draws FedProx's Synthetic(α, β) and Synthetic-IID data (Li
//     et al. 2020, §5.1), naturally federated over devices.
//   - Partitioner splits example indices among a population of clients:
//     IID, Dirichlet label skew (Hsu, Qi, Brown 2019, §3), label-sorted
//     shards (McMahan et al. 2017, §3, "pathological non-IID") and K labels
//     per client with power-law sizes (FedProx's MNIST, Li et al. 2020).
//   - Federated is the population: per-client index lists into one shared
//     base Dataset, packed so that a million mostly-empty clients cost a few
//     bytes each.
//   - OnDemand is a population of up to 10^9 users whose data is derived
//     from (seed, user id) when asked (label and quantity skew, eval
//     users), costing nothing per user; Population is what both kinds
//     offer a training loop.
//
// All randomness here is simulation randomness (which client holds which
// example), seeded and reproducible through math/rand/v2 PCG; nothing in
// this package is privacy-critical.
package data
