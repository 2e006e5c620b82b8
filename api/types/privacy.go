package types

import (
	"encoding/json"
	"time"
)

// PrivacyReport is a job's privacy ledger and the ε it amounts to. Events
// are in dp_accounting's DpEvent JSON form (see accounting.MarshalEvent),
// so ε can be recomputed independently from them (docs/auditing.md).
type PrivacyReport struct {
	JobID   string `json:"job_id"`
	Private bool   `json:"private"`
	// Delta is the job's δ: the guarantee is (Epsilon, Delta)-DP under
	// Adjacency.
	Delta float64 `json:"delta,omitempty"`
	// Adjacency is the neighbouring relation of the guarantee:
	// "add_remove" (one user more or less) or "replace_one" (one user's
	// data replaced by anything; README, "What is protected").
	Adjacency string `json:"adjacency,omitempty"`
	// AbortDelta is the part of Delta that secure aggregation's aborts
	// cost (abort.go); the accountants run at Delta − AbortDelta.
	AbortDelta float64 `json:"abort_delta,omitempty"`
	// Epsilon is the tighter valid upper bound on ε at Delta over every
	// recorded event; absent when there are none.
	Epsilon *float64 `json:"epsilon,omitempty"`
	// Accountant names the accountant that produced Epsilon.
	Accountant string `json:"accountant,omitempty"`
	// Accounting holds both accountants' estimates.
	Accounting *AccountingReport `json:"accounting,omitempty"`
	// EpsilonBudget is ε_max (0: none); Remaining is ε_max − ε.
	EpsilonBudget float64  `json:"epsilon_budget,omitempty"`
	Remaining     *float64 `json:"remaining,omitempty"`
	// Rounds is the number of committed rounds; Events holds at least one
	// per committed round, and one more for each round that an
	// interruption (kill, shutdown, cancel, failure) stopped after its
	// write-ahead event: ExtraEvents, which ε includes.
	Rounds      int           `json:"rounds"`
	ExtraEvents int           `json:"extra_events"`
	Events      []LedgerEntry `json:"events"`
	// Note explains a report without ε (a job without DP, say).
	Note string `json:"note,omitempty"`
	// Uncovered, when set, says why ε is not a proven bound for this
	// job's configuration (Spec.Uncovered).
	Uncovered string `json:"uncovered,omitempty"`
	// EmpiricalEpsilon is the canary audit's empirical ε, to set beside
	// Epsilon (audit.canaries > 0 only; canary.go).
	EmpiricalEpsilon *EmpiricalEpsilon `json:"empirical_epsilon,omitempty"`
}

// ModelExport is a job's latest global model.
type ModelExport struct {
	JobID     string `json:"job_id"`
	Model     string `json:"model"`
	Round     int    `json:"round"`
	NumParams int    `json:"num_params"`
	// Params is the flat parameter vector; fl/model documents its layout.
	Params []float32 `json:"params"`
	// Certificate is an audit.ModelCertificate in JSON: it ties the model
	// to the transparency log with its (ε, δ), adjacency and accountant,
	// its hash, the release leaf with its inclusion proof, and the signed
	// checkpoint (audit.VerifyModel checks it). Absent when the server
	// does not sign its log. It stays raw here so that the API's client
	// needs no transparency-log code; package audit decodes it.
	Certificate json.RawMessage `json:"certificate,omitempty"`
}

// Budget is a named privacy budget (ε_max, δ) shared by every job that
// trains on it (dp.budget; PUT /v1/budgets/{name}).
type Budget struct {
	// Name is the budget's name (1 to 64 bytes of [A-Za-z0-9._-]).
	Name string `json:"name"`
	// EpsilonBudget is ε_max, > 0.
	EpsilonBudget float64 `json:"epsilon_budget"`
	// Delta is the budget's δ, which every job on it uses.
	Delta float64 `json:"delta"`
	// CreatedAt is when the budget was created (UTC).
	CreatedAt time.Time `json:"created_at"`
}

// BudgetList is the answer of GET /v1/budgets: every shared budget's
// report, by name.
type BudgetList struct {
	Budgets []BudgetReport `json:"budgets"`
}

// BudgetReport is a shared budget, the jobs charged to it, its spend over
// all their ledgers and what its running jobs have reserved.
type BudgetReport struct {
	Budget
	// Adjacency is the neighbouring relation the budget's ε is stated under,
	// AdjacencyAddRemove or AdjacencyReplaceOne: that of its first job,
	// which every later job must share. "" until a job is admitted.
	Adjacency string `json:"adjacency"`
	// Jobs are the IDs of the DP jobs charged to the budget, oldest first.
	Jobs []string `json:"jobs"`
	// Events is the number of ledger events over all the budget's jobs.
	Events int `json:"events"`
	// ExtraEvents is how many of Events are beyond one per committed
	// round: write-ahead events of rounds that did not commit (at most one
	// per interruption of a running round; docs/auditing.md) and of
	// rounds running now. They are charged.
	ExtraEvents int `json:"extra_events"`
	// Epsilon is ε at the budget's δ over the Events (absent with none),
	// from Accountant; Accounting holds both accountants' estimates.
	Epsilon    *float64          `json:"epsilon,omitempty"`
	Accountant string            `json:"accountant,omitempty"`
	Accounting *AccountingReport `json:"accounting,omitempty"`
	// Remaining is ε_max − Epsilon: the budget not yet spent.
	Remaining float64 `json:"remaining"`
	// Running is the number of the budget's jobs that have not ended;
	// ReservedRounds is the rounds they have yet to run, each reserved at
	// the job's round event.
	Running        int `json:"running"`
	ReservedRounds int `json:"reserved_rounds"`
	// Committed is ε at the budget's δ over the Events and the reserved
	// rounds: the position a new job is admitted against (absent when
	// nothing is spent or reserved). Available is ε_max − Committed, the
	// most a new job can be admitted for.
	Committed *float64 `json:"committed_epsilon,omitempty"`
	Available float64  `json:"available"`
	// Note, when set, says why the budget's ε is not a proven bound.
	Note string `json:"note,omitempty"`
}

// EmpiricalEpsilon is the canary audit of a DP job (audit.canaries > 0):
// the empirical ε of Andrew et al. 2024 next to the analytical ε of the
// privacy report. The statistic of canary j is the cosine between the
// final model delta θ_T − θ_0 and its direction c_j; Gaussians are fitted
// to the cosines of the k inserted and the k' held-out canaries and ε is
// the (ε, δ) distance between the two at the report's δ
// (empirical.EstimateEpsilon). It is a function of the released model,
// the public initial model and directions drawn from a server secret
// independent of the users' data, so it releases nothing more about them.
type EmpiricalEpsilon struct {
	// Estimate is the point estimate; Lower and Upper bound its interval
	// at Confidence. Absent until the job has ended; capped at 10⁴ (said
	// in Note) when the canaries are separated beyond what the estimator
	// resolves.
	Estimate *float64 `json:"estimate,omitempty"`
	Lower    *float64 `json:"lower,omitempty"`
	Upper    *float64 `json:"upper,omitempty"`
	// Confidence is the interval's nominal coverage.
	Confidence float64 `json:"confidence,omitempty"`
	// Delta is the δ of the estimate, the analytical ε's.
	Delta float64 `json:"delta,omitempty"`
	// Canaries and HeldOut are k and k'.
	Canaries int `json:"canaries"`
	HeldOut  int `json:"held_out"`
	// Round is the round of the model the estimate is of; Dimension its
	// number of parameters d.
	Round     int `json:"round,omitempty"`
	Dimension int `json:"dimension,omitempty"`
	// Method names the statistic, the fit and the interval.
	Method string `json:"method"`
	// Fit holds the fitted Gaussians and intervals behind the estimate.
	Fit *CanaryFit `json:"fit,omitempty"`
	// Alarm is set when Lower exceeds the analytical ε: the canaries reveal
	// more than the ledger allows, which means an implementation bug
	// (docs/auditing.md, "Canaries").
	Alarm bool `json:"alarm"`
	// Note says why there is no estimate, or qualifies it.
	Note string `json:"note,omitempty"`
}

// CanaryFit is the fit behind an EmpiricalEpsilon: the cosines' means
// and standard deviations, the standardised shift and standard deviation
// ratio with their intervals, and NullStdSqrtD, the held-out canaries'
// standard deviation times √d, which is 1 for directions uniform on the
// sphere (their exact null has variance 1/d).
type CanaryFit struct {
	CanaryMean   float64    `json:"canary_mean"`
	CanaryStd    float64    `json:"canary_std"`
	NullMean     float64    `json:"null_mean"`
	NullStd      float64    `json:"null_std"`
	NullStdSqrtD float64    `json:"null_std_sqrt_d"`
	Shift        [3]float64 `json:"shift"` // estimate, lower, upper
	Ratio        [3]float64 `json:"ratio"` // estimate, lower, upper
	Resamples    int        `json:"resamples"`
}

// LedgerEntry is one record of a job's privacy ledger: the accounting
// event of one differentially private release, written before the
// release is made (write-ahead).
type LedgerEntry struct {
	// Seq numbers the job's entries from 1.
	Seq uint64 `json:"seq"`
	// Round is the round the event is charged for.
	Round int `json:"round"`
	// Event is the accounting event in dp_accounting's DpEvent JSON form
	// (accounting.MarshalEvent).
	Event json.RawMessage `json:"event"`
	// Time is when the entry was written (UTC).
	Time time.Time `json:"time"`
}

// Estimate is one accountant's bound on ε (the wire form of
// accounting.Estimate).
type Estimate struct {
	// Accountant is "rdp" or "pld".
	Accountant string `json:"accountant"`
	// Epsilon is the upper bound on ε (absent when not Valid or infinite).
	Epsilon *float64 `json:"epsilon,omitempty"`
	// Order is the RDP order α attaining Epsilon (RDP only).
	Order float64 `json:"order,omitempty"`
	// Valid says the accountant certified Epsilon for these events.
	Valid bool `json:"valid"`
	// Note explains an invalid or infinite estimate.
	Note string `json:"note,omitempty"`
}

// AccountingReport is ε at δ under both accountants, and the tighter
// valid one (the wire form of accounting.Report).
type AccountingReport struct {
	// Delta is the δ at which ε is stated.
	Delta float64 `json:"delta"`
	// RDP is the Rényi DP accountant's estimate.
	RDP Estimate `json:"rdp"`
	// PLD is the privacy loss distribution accountant's estimate.
	PLD Estimate `json:"pld"`
	// Best is the smaller valid ε of the two: both are upper bounds on
	// the true ε, so the smaller is the better bound.
	Best Estimate `json:"best"`
	// PLDMethod names the algorithm that computed PLD (accounting.PLDMethod,
	// e.g. "pld/2"; docs/privacy.md, "Method names"), so that an auditor
	// recomputes the figure with the same one.
	PLDMethod string `json:"pld_method,omitempty"`
}
