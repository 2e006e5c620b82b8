"""dpfl: a Python client of dpfl-server, the differentially private
federated learning service (standard library only; numpy optional).

    >>> import dpfl
    >>> c = dpfl.Client()   # $DPFL_SERVER (default http://127.0.0.1:8080), $DPFL_TOKEN
    >>> job = c.submit("examples/demo-job.json")
    >>> final = c.watch(job["id"], progress=lambda st: print(st["round"]))
    >>> dpfl.test_accuracy(final), c.privacy(job["id"])["epsilon"]

The calls (:class:`Client`): :meth:`~Client.submit`, :meth:`~Client.watch`,
:meth:`~Client.list`, :meth:`~Client.status`, :meth:`~Client.metrics`,
:meth:`~Client.rounds`, :meth:`~Client.privacy`, :meth:`~Client.cancel`,
:meth:`~Client.model`, :meth:`~Client.create_budget`,
:meth:`~Client.budget` and :meth:`~Client.budgets`. Answers are the
server's JSON as dicts (described by the TypedDicts of :mod:`dpfl.types`),
the model a :class:`Model`. Errors are :class:`DpflError` subclasses
(:mod:`dpfl.errors`). docs/python.md has an example; docs/api.md is the
API's reference.
"""

from .client import DEFAULT_SERVER, Client, DeprecatedSpecKey, SpecSource, is_terminal, latest_epsilon, test_accuracy
from .errors import (
    Conflict,
    ConnectionFailed,
    DpflError,
    FieldError,
    Forbidden,
    HTTPError,
    NotFound,
    NotSupported,
    RequestTooLarge,
    ServerError,
    StalledError,
    Timeout,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    ValidationError,
    WatchTimeout,
)
from .model import Layer, Model, have_numpy
from .types import TERMINAL_STATES, BudgetReport, JobState, JobStatus, PrivacyReport, RoundMetrics, RoundRecord

__version__ = "0.1.0"
"""The client's version."""

__all__ = [
    "Client",
    "DEFAULT_SERVER",
    "DeprecatedSpecKey",
    "SpecSource",
    "is_terminal",
    "latest_epsilon",
    "test_accuracy",
    "Model",
    "Layer",
    "have_numpy",
    "TERMINAL_STATES",
    "JobState",
    "JobStatus",
    "RoundMetrics",
    "RoundRecord",
    "PrivacyReport",
    "BudgetReport",
    "DpflError",
    "HTTPError",
    "FieldError",
    "ValidationError",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "RequestTooLarge",
    "TooManyRequests",
    "ServerError",
    "Unavailable",
    "Timeout",
    "ConnectionFailed",
    "WatchTimeout",
    "StalledError",
    "NotSupported",
]
