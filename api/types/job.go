package types

import "time"

// JobState is a job's lifecycle state as the API reports it. The server
// keeps its own copy of these strings in package storage and maps them
// one to one.
type JobState string

// Job states. Pending and Running are live; the rest are terminal and final.
const (
	// StatePending: created, not yet started.
	StatePending JobState = "pending"
	// StateRunning: rounds in progress.
	StateRunning JobState = "running"
	// StateCompleted: ran all configured rounds.
	StateCompleted JobState = "completed"
	// StateFailed: stopped by an error; Status.Message says why.
	StateFailed JobState = "failed"
	// StateCancelled: stopped by a user.
	StateCancelled JobState = "cancelled"
	// StateBudgetExhausted: stopped because the next round would exceed
	// the privacy budget (ε, δ) according to the ledger.
	StateBudgetExhausted JobState = "budget_exhausted"
)

// Terminal reports whether s is a final state: the job will run no more
// rounds.
func (s JobState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateBudgetExhausted:
		return true
	}
	return false
}

// Status is a job as the API shows it: its stored record, its spec and the
// latest round's metrics.
type Status struct {
	// ID is the job's ID, assigned by the server.
	ID string `json:"id"`
	// State is where the job is in its lifecycle.
	State JobState `json:"state"`
	// Message says why a job failed (or how it ended), if it did.
	Message string `json:"message,omitempty"`
	// Round is the last committed round (0: none yet).
	Round int `json:"round"`
	// CreatedAt and UpdatedAt are when the job was submitted and when its
	// record last changed (UTC).
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Spec is the job's configuration as the server stored it (with the
	// defaults and the server's calibrations filled in).
	Spec Spec `json:"spec"`
	// Latest is the last committed round (nil before the first).
	Latest *RoundMetrics `json:"latest,omitempty"`
	// LatestTest is the most recent evaluation on the test split.
	LatestTest *RoundMetrics `json:"latest_evaluated,omitempty"`
	// Notes are facts about the job's data that qualify its guarantee
	// (e.g. examples shared by several users of an on-demand population).
	Notes []string `json:"notes,omitempty"`
	// Warnings, in the answer to a submission only, are what the server
	// read but will not read for long: deprecated keys, with the names
	// that replace them.
	Warnings []string `json:"warnings,omitempty"`
	// Leader is the server replica that runs the job now, with an etcd
	// store (docs/ha.md); absent with a bbolt store, for a job no replica
	// leads at the moment (between two leaders, or ended), and in lists.
	Leader *JobLeader `json:"leader,omitempty"`
}

// JobLeader names the replica that leads a job (issue 18, docs/ha.md): it
// alone runs the job's rounds, and every ledger append and round commit
// it makes is fenced on Epoch, so a replica that lost the job cannot
// write. The answer is already possibly stale when it arrives.
type JobLeader struct {
	// Replica is the leader's --replica-id.
	Replica string `json:"replica"`
	// Epoch is the etcd revision at which the leader's election key was
	// created; a later leader of the same job always has a larger one.
	Epoch int64 `json:"epoch"`
	// URL is the leader's --advertise-url (absent if not registered).
	URL string `json:"url,omitempty"`
}

// RoundRecord is one round's participation and timing, as
// GET /v1/jobs/{id}/rounds shows it.
//
// Its counts are RoundMetrics' under the same names. Under DP they are
// private and absent, except Selected for a fixed cohort (the configured
// K).
type RoundRecord struct {
	// Round numbers the round from 1.
	Round int `json:"round"`
	// Selected is the sampled cohort.
	Selected int `json:"selected,omitempty"`
	// Unavailable counts the selected users not online in the round.
	Unavailable int `json:"unavailable,omitempty"`
	// Reported counts the clients whose updates the aggregate holds.
	Reported int `json:"reported,omitempty"`
	// DroppedOut counts the selected users that dropped out before
	// reporting (participation.dropout_rate); secure aggregation's own
	// dropouts are SecAgg.Dropped.
	DroppedOut int `json:"dropped_out,omitempty"`
	// Late counts the reports past the deadline or the over-selection
	// target.
	Late int `json:"late,omitempty"`
	// Stragglers counts the cohort's simulated stragglers, kept or not
	// (client.drop_stragglers).
	Stragglers int `json:"stragglers,omitempty"`
	// Rejected counts the updates refused as non-finite.
	Rejected int `json:"rejected,omitempty"`
	// SecAgg describes the round's secure aggregation instance (with
	// secure_aggregation only).
	SecAgg *SecAggStats `json:"secagg,omitempty"`
	// EstimatedSeconds and EstimatedTotalSeconds are the round-time
	// model's deployment estimates (absent when the job has none, and
	// under DP, where they follow the cohort's largest dataset).
	EstimatedSeconds      float64 `json:"estimated_seconds,omitempty"`
	EstimatedTotalSeconds float64 `json:"estimated_total_seconds,omitempty"`
	// Seconds is the simulation's own wall time for the round (absent
	// under DP).
	Seconds float64 `json:"seconds,omitempty"`
	// TestAccuracy is the global model's accuracy on the test split, on
	// evaluation rounds only.
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	// Epsilon is ε at the job's δ after this round (under DP only).
	Epsilon *float64 `json:"epsilon,omitempty"`
}

// RoundMetrics is what a job records for each committed round. Under DP
// the server releases only what the privacy analysis covers (the counts
// and training statistics are then absent, except Selected for a fixed
// cohort). Rounds stored by earlier releases, with the keys cohort (now
// selected) and clients (now held_out), still read.
type RoundMetrics struct {
	// Round numbers the round from 1.
	Round int `json:"round"`
	// Selected is the sampled cohort.
	Selected int `json:"selected,omitempty"`
	// Reported is the number of clients whose updates the aggregate holds.
	Reported int `json:"reported,omitempty"`
	// Examples is the number of training examples of the reported clients.
	Examples int `json:"examples,omitempty"`
	// TrainLoss is the reported clients' mean training loss.
	TrainLoss float64 `json:"train_loss,omitempty"`
	// MeanUpdateNorm is the mean L2 norm of the clients' updates before
	// clipping.
	MeanUpdateNorm float64 `json:"mean_update_norm,omitempty"`
	// ClippedFraction is the fraction of updates the clip norm shortened.
	ClippedFraction float64 `json:"clipped_fraction,omitempty"`
	// Rejected counts the updates refused as non-finite.
	Rejected int `json:"rejected,omitempty"`
	// Stragglers counts the cohort's simulated stragglers.
	Stragglers int `json:"stragglers,omitempty"`
	// Unavailable counts the selected users not online in the round.
	Unavailable int `json:"unavailable,omitempty"`
	// DroppedOut counts the selected users that dropped out before
	// reporting.
	DroppedOut int `json:"dropped_out,omitempty"`
	// Late counts the reports past the deadline or the over-selection
	// target.
	Late int `json:"late,omitempty"`
	// EstimatedSeconds is the round's estimated time on real devices
	// (round_time).
	EstimatedSeconds float64 `json:"estimated_seconds,omitempty"`
	// EstimatedTotalSeconds is the job's estimated time on real devices
	// so far.
	EstimatedTotalSeconds float64 `json:"estimated_total_seconds,omitempty"`
	// Test is the global model on the dataset's test split, on evaluation
	// rounds only.
	Test *Metrics `json:"test,omitempty"`
	// EvalUsers is the global model on up to 1,000 users that never train
	// (population.eval_user_fraction), on evaluation rounds only.
	EvalUsers *ClientMetrics `json:"eval_users,omitempty"`
	// HeldOut is the global model on the clients' held-out examples, when
	// the partition holds some out and on evaluation rounds only.
	HeldOut *ClientMetrics `json:"held_out,omitempty"`
	// SecAgg describes the round's secure aggregation instance (with
	// secure_aggregation only).
	SecAgg *SecAggStats `json:"secagg,omitempty"`
	// NoisyClipNorm is the clip norm C_t the round clipped with, under
	// adaptive clipping (dp.adaptive_clipping) only: a function of the
	// earlier rounds' NoisyUnclippedFraction, so released under DP.
	NoisyClipNorm *float64 `json:"noisy_clip_norm,omitempty"`
	// NoisyUnclippedFraction is b̃_t, the noisy fraction of the round's
	// updates with norm at most C_t (Andrew et al. 2021, Algorithm 1):
	// (Σ(b_i − 1/2) + N(0, σ_b²))/m + 1/2 with m the expected cohort.
	// Under adaptive clipping only; its noise is part of the round's
	// Gaussian event in the ledger.
	NoisyUnclippedFraction *float64 `json:"noisy_unclipped_fraction,omitempty"`
	// Epsilon is ε at the job's δ after this round (absent without DP).
	Epsilon *float64 `json:"epsilon,omitempty"`
	// Accountant names the accountant whose bound Epsilon is.
	Accountant string `json:"accountant,omitempty"`
	// Seconds is the simulation's own wall time for the round.
	Seconds float64 `json:"seconds,omitempty"`
	// Time is when the round was committed (UTC).
	Time time.Time `json:"time"`
}

// Metrics is a model's loss and accuracy on a set of examples (the wire
// form of fl.Metrics).
type Metrics struct {
	// Loss is the mean cross-entropy loss per example.
	Loss float64 `json:"loss"`
	// Accuracy is the fraction of examples classified correctly, in [0, 1].
	Accuracy float64 `json:"accuracy"`
	// Examples is the number of examples scored.
	Examples int `json:"examples"`
}

// ClientMetrics is a model scored per client (the wire form of
// fl.ClientMetrics).
type ClientMetrics struct {
	// Weighted pools every held-out example (example-weighted).
	Weighted Metrics `json:"weighted"`
	// MeanAccuracy is the unweighted mean of per-client accuracies, over
	// clients with at least one held-out example.
	MeanAccuracy float64 `json:"mean_accuracy"`
	// P10Accuracy is the 10th percentile (nearest rank) of the per-client
	// accuracies: the tail a mean hides (Field Guide §4.2.1).
	P10Accuracy float64 `json:"p10_accuracy"`
	// MinAccuracy is the lowest per-client accuracy.
	MinAccuracy float64 `json:"min_accuracy"`
	// Clients is the number of clients evaluated.
	Clients int `json:"clients"`
}

// SecAggStats describes one secure aggregation instance (the wire form of
// fl.SecAggStats; Bonawitz et al. 2017's U1 and U3).
type SecAggStats struct {
	// Clients is |U1|, the clients that advertised keys.
	Clients int `json:"clients"`
	// Survivors is |U3|, the clients whose inputs the sum holds.
	Survivors int `json:"survivors"`
	// Dropped is Clients − Survivors.
	Dropped int `json:"dropped"`
	// Neighbors is the instance's k: each client's neighbours in the
	// SecAgg+ graph.
	Neighbors int `json:"neighbors"`
	// Threshold is the instance's t: the shares needed to reconstruct.
	Threshold int `json:"threshold"`
	// FracBits is the fixed-point precision f of the encoding.
	FracBits int `json:"frac_bits"`
	// Attempt numbers the instance within its round (1 unless earlier
	// attempts aborted below threshold).
	Attempt int `json:"attempt"`
}
