"""The wire types of dpfl-server's REST API, as typed dictionaries.

The client returns the server's JSON as plain ``dict`` objects; these
``TypedDict`` classes only describe them for type checkers and readers.
They mirror package ``api/types`` of the Go code, whose doc comments are
the reference; keys the server leaves out (``omitempty``) may be absent,
so every class is ``total=False``. Times are RFC 3339 strings in UTC.

Terms (docs/glossary.md): a *client* is a user as training sees it; the
*population* is the N users a job trains on; the *cohort* is the users
sampled for one *round*; C is the clip norm, z the noise multiplier, q the
Poisson sampling rate, and (ε, δ) the privacy guarantee.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict

__all__ = [
    "JobState",
    "TERMINAL_STATES",
    "TestMetrics",
    "RoundMetrics",
    "RoundRecord",
    "JobStatus",
    "Estimate",
    "AccountingReport",
    "LedgerEntry",
    "PrivacyReport",
    "BudgetReport",
    "Spec",
]

JobState = Literal["pending", "running", "completed", "failed", "cancelled", "budget_exhausted"]
"""A job's lifecycle state. ``pending`` and ``running`` are live; the rest
are terminal and final."""

TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "budget_exhausted"})
"""The states after which a job runs no more rounds."""

Spec = Dict[str, Any]
"""A job spec: the JSON object of docs/job-spec.md (``{}`` is the demo
job). Keys left out take the server's defaults."""


class TestMetrics(TypedDict, total=False):
    """A model's score on a set of examples (``types.Metrics``)."""

    loss: float
    """Mean cross-entropy loss per example."""
    accuracy: float
    """Fraction of examples classified correctly, in [0, 1]."""
    examples: int
    """Number of examples scored."""


class RoundMetrics(TypedDict, total=False):
    """One committed round's metrics (``types.RoundMetrics``). Under DP the
    server releases only ``round``, ``epsilon``, ``accountant``, ``time``, a
    fixed cohort's ``selected`` and ``test``; the other keys are absent."""

    round: int
    """The round number, from 1."""
    selected: int
    """Users sampled for the round (the cohort)."""
    reported: int
    """Clients whose updates the aggregate holds."""
    test: TestMetrics
    """The global model on the test split, on evaluation rounds only."""
    epsilon: float
    """ε at the job's δ after this round (DP only)."""
    accountant: str
    """The accountant whose bound ``epsilon`` is: ``"rdp"`` or ``"pld"``."""
    time: str
    """When the round was committed (RFC 3339, UTC)."""


class RoundRecord(TypedDict, total=False):
    """One round's participation and timing (``types.RoundRecord``)."""

    round: int
    selected: int
    test_accuracy: float
    epsilon: float
    estimated_seconds: float
    """The round-time model's estimate of the round on real devices, in
    seconds (absent under DP)."""
    estimated_total_seconds: float


class JobStatus(TypedDict, total=False):
    """A job as the API shows it (``types.Status``)."""

    id: str
    """The job's ID, assigned by the server."""
    state: JobState
    message: str
    """Why a job failed, or how it ended."""
    round: int
    """The last committed round (0: none yet)."""
    created_at: str
    updated_at: str
    spec: Spec
    """The spec as the server stored it: defaults and calibrations filled in
    (``spec["rounds"]`` is T, ``spec["dp"]["delta"]`` is δ)."""
    latest: RoundMetrics
    """The last committed round (absent before the first)."""
    latest_evaluated: RoundMetrics
    """The most recent round with a test score."""
    notes: List[str]
    warnings: List[str]
    """In the answer to a submission only: deprecated keys it used."""


class Estimate(TypedDict, total=False):
    """One accountant's upper bound on ε (``types.Estimate``)."""

    accountant: str
    """``"rdp"`` or ``"pld"``."""
    epsilon: float
    """The bound (absent when not valid or infinite)."""
    order: float
    """The RDP order α attaining it (RDP only)."""
    valid: bool
    note: str


class AccountingReport(TypedDict, total=False):
    """ε at δ under both accountants (``types.AccountingReport``)."""

    delta: float
    rdp: Estimate
    pld: Estimate
    best: Estimate
    """The smaller valid bound of the two."""
    pld_method: str


class LedgerEntry(TypedDict, total=False):
    """One privacy ledger record (``types.LedgerEntry``)."""

    seq: int
    """Numbers the job's entries from 1."""
    round: int
    """The round the event is charged for."""
    event: Dict[str, Any]
    """The event in dp_accounting's DpEvent JSON form, e.g.
    ``{"type": "PoissonSampledDpEvent", "sampling_probability": q,
    "event": {"type": "GaussianDpEvent", "noise_multiplier": z}}``."""
    time: str


class PrivacyReport(TypedDict, total=False):
    """A job's privacy ledger and the ε it amounts to
    (``types.PrivacyReport``; GET /v1/jobs/{id}/privacy)."""

    job_id: str
    private: bool
    """Whether the job runs with DP."""
    delta: float
    """The job's δ: the guarantee is (ε, δ)-DP under ``adjacency``."""
    adjacency: str
    """``"add_remove"`` or ``"replace_one"``."""
    abort_delta: float
    epsilon: float
    """The tighter valid upper bound on ε at δ over every event (absent
    with none)."""
    accountant: str
    accounting: AccountingReport
    epsilon_budget: float
    """ε_max (absent: none)."""
    remaining: float
    """ε_max − ε."""
    rounds: int
    """Committed rounds."""
    extra_events: int
    """Events beyond one per committed round (interruptions); charged."""
    events: List[LedgerEntry]
    note: str
    uncovered: str
    """Set when ε is not a proven bound for the job's configuration."""
    empirical_epsilon: Dict[str, Any]
    """The canary audit (``audit.canaries`` > 0 only)."""


class BudgetReport(TypedDict, total=False):
    """A shared privacy budget (ε_max, δ), its jobs and spend
    (``types.BudgetReport``; /v1/budgets/{name})."""

    name: str
    epsilon_budget: float
    """ε_max, > 0."""
    delta: float
    """The budget's δ, which every job on it uses."""
    created_at: str
    adjacency: str
    """That of its first job; ``""`` until one is admitted."""
    jobs: List[str]
    """The IDs of the DP jobs charged to it, oldest first."""
    events: int
    extra_events: int
    epsilon: float
    """ε at δ over the events of all its jobs (absent with none)."""
    accountant: str
    accounting: AccountingReport
    remaining: float
    """ε_max − ε: the budget not yet spent."""
    running: int
    reserved_rounds: int
    committed_epsilon: float
    """ε over the events and the rounds running jobs have reserved."""
    available: float
    """ε_max − committed ε: the most a new job can be admitted for."""
    note: str
