// Package fl implements generalized federated averaging: FedAvg and FedOpt
// as one algorithm (Wang et al. 2021, "A Field Guide to Federated
// Optimization", Algorithm 1; Reddi et al. 2021, "Adaptive Federated
// Optimization", Algorithm 1), with the user-level DP aggregation of
// DP-FedAvg (McMahan et al. 2018, Algorithm 1).
//
// One round, as in Algorithm 1 of the Field Guide:
//
//	sample a cohort S_t of clients                         (Sampler)
//	for each client i in S_t, in parallel:
//	    x_i ← x_t; run E epochs of minibatch SGD, lr η_l    (ClientConfig)
//	    Δ_i ← x_i − x_t
//	Δ_t ← aggregate of the Δ_i                             (Aggregator)
//	x_{t+1} ← ServerOpt(x_t, −Δ_t, η_s, t)                 (ServerOptimizer)
//
// −Δ_t is the pseudo-gradient; server SGD with η_s = 1 recovers FedAvg of
// McMahan et al. 2017. Aggregation streams: each worker keeps one running
// partial sum, so memory is O(workers · d), never O(cohort · d).
package fl
