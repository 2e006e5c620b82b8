// Package fl implements generalized federated averaging: FedAvg and FedOpt
// as one algorithm (Wang et al. 2021, "A Field Guide to Federated
// Optimization", Algorithm 1; Reddi et al. 2021, "Adaptive Federated
// Optimization", Algorithm 1), with the user-level DP aggregation of
// DP-FedAvg (McMahan et al. 2018, Algorithm 1).
//
// One round, as in Algorithm 1 of the Field Guide, and its stages in
// FedAvg.Round:
//
//	sample a cohort S_t of clients                         (Sampler)
//	for each client i in S_t, in parallel:                 train
//	    x_i ← x_t; run E epochs of minibatch SGD, lr η_l    (ClientConfig)
//	    Δ_i ← x_i − x_t
//	keep, hold or drop each report                         filter (Simulation)
//	Δ_t ← aggregate of the Δ_i                             aggregate (Aggregator)
//	x_{t+1} ← ServerOpt(x_t, −Δ_t, η_s, t)                 server (ServerUpdate)
//
// −Δ_t is the pseudo-gradient; server SGD with η_s = 1 recovers FedAvg of
// McMahan et al. 2017. ServerUpdate is also the server step of a round
// with real devices. Aggregation streams: the reports enter one running
// aggregate in cohort order (so the result is the same for any number of
// workers), with memory O(workers · d), never O(cohort · d).
//
// The variants, each a small change to that loop:
//
//   - server optimizers (fedopt.go): FedAvgM, and FedAdagrad, FedAdam,
//     FedYogi of Reddi et al. 2021, Algorithm 2;
//   - client (client.go): FedProx's proximal term μ/2·‖x − x_t‖² (Li et
//     al. 2020), client momentum and learning-rate schedules (schedule.go);
//   - client variants (ClientVariant, variant.go): SCAFFOLD's control
//     variates (scaffold.go) and FedNova's normalized averaging
//     (fednova.go), for cross-silo jobs without DP;
//   - the simulated population (Simulation, simulation.go): stragglers
//     that run fewer epochs or are dropped, device times, a deadline and
//     over-selection's target;
//   - secure aggregation of the cohort's clipped, encoded updates
//     (secure.go, package secagg).
//
// Weighting (Field Guide §3.2.4): without DP the aggregate weights each
// client by its number of examples, Δ_t = Σ n_i Δ_i / Σ n_i, which makes
// FedAvg an unbiased step on the average over examples. Under DP every
// client weighs the same and the sum is divided by the fixed expected
// cohort size (q·N or K), because example-count weights would let one
// user's influence exceed C/denominator and break the sensitivity bound
// (McMahan et al. 2018, §2); the objective is then the average over users.
//
// Cross-device participation and DP (participation.go, roundtime.go,
// event.go). The ledger's event for a round is RoundEvent, computed from
// the Sampler and the round's Sensitivity, which every caller (job
// runner, admission, calibration, experiments) uses, so that mechanism
// and event cannot drift apart. The accountant analyses the server's own
// sampling over the whole population (Poisson at rate q·(1+o) with
// over-selection o, or a fixed cohort, replace-one). Filters that decide a
// user's inclusion from that user's own data and seeded draws only —
// availability, dropouts, stragglers, a deadline on the user's modelled
// device time (SimulatedSeconds: its own example count, never a clock) —
// remove a contribution whole, so the sum's sensitivity stays C. A Target
// (over-selection keeps the earliest reports) lets one user's report push
// another's out: sensitivity 2C, charged as noise multiplier z/2
// (FedAvg.Sensitivity). Ties in device time go to the smaller client ID.
// Under secure aggregation the noise is added in the ring before decoding
// (ReleaseSecureSum), so a malicious client's wrap-around is
// post-processing; the fixed-point encoding comes from a public cohort
// bound (SecureAggregator.MaxClients) and the simulated protocol collects
// no per-client statistic. A fixed cohort drawn among the users online in
// a round is outside every analysis here, and the job layer refuses it
// under DP. The round-time model (Field Guide §5.4) turns each simulated
// round into an estimated deployment time, which DP jobs do not release.
package fl
