"""The client of dpfl-server's REST API (docs/api.md), standard library only.

    >>> import dpfl
    >>> c = dpfl.Client()            # $DPFL_SERVER and $DPFL_TOKEN
    >>> st = c.submit("examples/demo-job.json")
    >>> st = c.watch(st["id"], progress=lambda s: print(s["round"]))
    >>> c.privacy(st["id"])["epsilon"]

Every call raises a :class:`dpfl.DpflError` on failure: an
:class:`dpfl.HTTPError` subclass for the server's refusals (its status,
message and, for a 400, every broken (field, rule, message)),
:class:`dpfl.Timeout` when the server does not answer in time, and
:class:`dpfl.ConnectionFailed` when there is no connection.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .errors import (
    ConnectionFailed,
    DpflError,
    NotFound,
    NotSupported,
    StalledError,
    Timeout,
    WatchTimeout,
    error_for_status,
)
from .model import Model, params_from_json
from .types import TERMINAL_STATES, BudgetReport, JobStatus, PrivacyReport, RoundMetrics, RoundRecord

__all__ = [
    "Client",
    "DEFAULT_SERVER",
    "DeprecatedSpecKey",
    "SpecSource",
    "is_terminal",
    "test_accuracy",
    "latest_epsilon",
]

#: The server the client talks to when neither ``server`` nor
#: ``$DPFL_SERVER`` names one (as dpfl-client).
DEFAULT_SERVER = "http://127.0.0.1:8080"

#: What :meth:`Client.submit` takes: a spec as a mapping, the path of a
#: JSON file holding one, or the JSON text itself as bytes.
SpecSource = Union[Mapping[str, Any], str, "os.PathLike[str]", bytes]

_USER_AGENT = "dpfl-python/0.1"
# As the Go client: wait out a 429 that carries Retry-After (a rate limit:
# the server did nothing with the request) at most this often and long.
_MAX_RETRY_AFTER = 10.0


class DeprecatedSpecKey(FutureWarning):
    """Issued by :meth:`Client.submit` for every renamed key the spec used
    (the server accepted it and says which key replaces it;
    docs/job-spec.md, "Renamed keys")."""


def is_terminal(status: Union[Mapping[str, Any], str]) -> bool:
    """Whether a job (its status, or its state string) has ended:
    ``completed``, ``failed``, ``cancelled`` or ``budget_exhausted``."""
    state = status if isinstance(status, str) else status.get("state", "")
    return state in TERMINAL_STATES


def test_accuracy(status: Mapping[str, Any]) -> Optional[float]:
    """The test accuracy, in [0, 1], of a job's most recent evaluation
    (``latest_evaluated.test.accuracy``), or ``None`` before the first."""
    ev = status.get("latest_evaluated") or {}
    test = ev.get("test") or {}
    acc = test.get("accuracy")
    return float(acc) if acc is not None else None


# Not a test for unittest's or pytest's collectors.
test_accuracy.__test__ = False  # type: ignore[attr-defined]


def latest_epsilon(status: Mapping[str, Any]) -> Optional[float]:
    """ε at the job's δ after its last committed round
    (``latest.epsilon``), or ``None`` without DP or before the first round.
    The privacy report (:meth:`Client.privacy`) is the authoritative
    figure."""
    eps = (status.get("latest") or {}).get("epsilon")
    return float(eps) if eps is not None else None


class Client:
    """A client of one dpfl-server.

    Args:
        server: the server's base URL, e.g. ``"https://dpfl.example:8443"``.
            Default: ``$DPFL_SERVER``, else ``http://127.0.0.1:8080``.
        token: the API token (admin, or auditor for the calls that only
            read), sent as ``Authorization: Bearer``. Default: the contents
            of ``token_file``, else ``$DPFL_TOKEN``. Without one, every call
            but :meth:`health` raises :class:`dpfl.Unauthorized`.
        token_file: a file holding the token (surrounding whitespace is
            stripped).
        ca_file: PEM certificates to trust for an ``https://`` server
            instead of the system's. Default: ``$DPFL_CA``.
        timeout: seconds to wait for each HTTP exchange (connecting and
            each read) before raising :class:`dpfl.Timeout`.
        max_rate_retries: how often a 429 with ``Retry-After`` (at most 10
            s) is waited out and sent again before it is raised as
            :class:`dpfl.TooManyRequests`; likewise a 503 with
            ``Retry-After`` to a GET (:class:`dpfl.Unavailable`).

    A Client holds no connection between calls and may be shared by
    threads.
    """

    def __init__(
        self,
        server: Optional[str] = None,
        token: Optional[str] = None,
        *,
        token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
        ca_file: Optional[Union[str, "os.PathLike[str]"]] = None,
        timeout: float = 60.0,
        max_rate_retries: int = 5,
    ) -> None:
        base = server or os.environ.get("DPFL_SERVER") or DEFAULT_SERVER
        self.server: str = base.rstrip("/")
        """The server's base URL."""
        if token is None and token_file is not None:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        if token is None:
            token = os.environ.get("DPFL_TOKEN", "")
        self._token = token
        self.timeout: float = float(timeout)
        """Seconds to wait for each HTTP exchange."""
        self.max_rate_retries = max_rate_retries
        if ca_file is None:
            ca_file = os.environ.get("DPFL_CA") or None
        handlers: List[urllib.request.BaseHandler] = []
        if ca_file is not None:
            ctx = ssl.create_default_context(cafile=os.fspath(ca_file))
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            handlers.append(urllib.request.HTTPSHandler(context=ctx))
        if _is_loopback(self.server):
            # As Go's ProxyFromEnvironment: never proxy a loopback server.
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return "dpfl.Client(%r)" % self.server

    # -- transport ---------------------------------------------------------

    def _request(self, method: str, path: str, body: Optional[bytes] = None) -> Any:
        """Send one request and return its decoded JSON answer.

        Raises:
            HTTPError: a non-2xx answer (the subclass of its status).
            Timeout, ConnectionFailed: no answer.
            DpflError: a 2xx answer that is not JSON.
        """
        url = self.server + path
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        attempt = 0
        while True:
            status, data, retry_after = self._send(method, url, body, headers)
            # A 503 is waited out for reads only: a write's outcome is
            # unknown then (it may have been applied), so it is raised.
            retry = status == 429 or (status == 503 and method == "GET")
            if retry and retry_after is not None and 0 < retry_after <= _MAX_RETRY_AFTER and attempt < self.max_rate_retries:
                attempt += 1
                time.sleep(retry_after)
                continue
            text = data.decode("utf-8", errors="replace")
            if not 200 <= status < 300:
                try:
                    decoded = json.loads(text)
                except ValueError:
                    decoded = None
                if not isinstance(decoded, dict):
                    decoded = {}
                raise error_for_status(status, decoded, text, method=method, url=url, retry_after=retry_after)
            if not data:
                return None
            try:
                return json.loads(text)
            except ValueError as e:
                raise DpflError("%s %s: the server's answer is not JSON: %s" % (method, url, e)) from e

    def _send(self, method: str, url: str, body: Optional[bytes], headers: Dict[str, str]) -> Tuple[int, bytes, Optional[float]]:
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, resp.read(), _retry_after(resp.headers.get("Retry-After"))
        except urllib.error.HTTPError as e:
            try:
                data = e.read()
            except (OSError, ValueError):
                data = b""
            finally:
                e.close()
            return e.code, data, _retry_after(e.headers.get("Retry-After") if e.headers else None)
        except urllib.error.URLError as e:
            if isinstance(e.reason, (socket.timeout, TimeoutError)):
                raise Timeout("%s %s: no answer from dpfl-server within %g s" % (method, url, self.timeout)) from e
            raise ConnectionFailed("contacting dpfl-server at %s: %s" % (self.server, e.reason)) from e
        except (socket.timeout, TimeoutError) as e:
            raise Timeout("%s %s: no answer from dpfl-server within %g s" % (method, url, self.timeout)) from e
        except (OSError, ValueError) as e:  # http.client's errors, a reset connection, a bad URL
            raise ConnectionFailed("contacting dpfl-server at %s: %s" % (self.server, e)) from e

    # -- routes ------------------------------------------------------------

    def health(self) -> None:
        """Check that the server is up (GET /healthz; needs no token).

        Raises:
            ConnectionFailed, Timeout: the server does not answer.
            HTTPError: it answers, but not 200.
        """
        self._request("GET", "/healthz")

    def submit(self, spec: SpecSource) -> JobStatus:
        """Create and start a job (POST /v1/jobs).

        Args:
            spec: the job spec (docs/job-spec.md): a mapping (``{}`` is the
                demo job; keys left out take the server's defaults), the
                path of a JSON file holding one (``str`` or
                ``os.PathLike``), or the JSON text as ``bytes``. The server
                reads it strictly: one object, each key once, no unknown
                key. Population size N, sampling rate q, clip norm C, noise
                multiplier z and δ are ``population.size``,
                ``sampling.rate``, ``dp.clip_norm``,
                ``dp.noise_multiplier`` and ``dp.delta``.

        Returns:
            The new job's status (201): its ``id``, ``state`` and the spec
            with the server's defaults and calibrations filled in. Renamed
            keys the spec used are also issued as
            :class:`DeprecatedSpecKey` warnings.

        Raises:
            ValidationError: the spec breaks rules; ``errors`` lists every
                (field, rule, message) in the server's order. Nothing is
                stored.
            Forbidden: an auditor's token.
            Conflict: the job does not fit its budget's remaining ε.
            TooManyRequests: the server runs ``--max-running-jobs`` jobs.
            OSError: the spec file cannot be read.
            ValueError: a mapping that JSON cannot hold (NaN, ±Inf, …).
        """
        if isinstance(spec, bytes):
            body = spec
        elif isinstance(spec, (str, os.PathLike)):
            with open(spec, "rb") as f:
                body = f.read()
        elif isinstance(spec, Mapping):
            body = json.dumps(spec, allow_nan=False).encode("utf-8")
        else:
            raise TypeError("spec must be a mapping, a JSON file's path or JSON bytes, not %s" % type(spec).__name__)
        st = self._request("POST", "/v1/jobs", body)
        for w in st.get("warnings") or []:
            warnings.warn(w, DeprecatedSpecKey, stacklevel=2)
        return st

    def list(self) -> List[JobStatus]:
        """Every job on the server, as statuses (GET /v1/jobs)."""
        return self._request("GET", "/v1/jobs").get("jobs") or []

    def status(self, job_id: str) -> JobStatus:
        """One job's status (GET /v1/jobs/{id}): state, last committed
        round, the stored spec, the latest round's metrics
        (``latest``) and evaluation (``latest_evaluated``), notes.

        Raises:
            NotFound: no such job.
        """
        return self._request("GET", "/v1/jobs/" + _seg(job_id))

    def watch(
        self,
        job_id: str,
        *,
        interval: float = 1.0,
        progress: Optional[Callable[[JobStatus], None]] = None,
        timeout: Optional[float] = None,
        stall: Optional[float] = None,
    ) -> JobStatus:
        """Poll a job until it reaches a terminal state and return its final
        status.

        Args:
            job_id: the job.
            interval: seconds between polls.
            progress: called with every status polled, the last included
                (e.g. to print ``status["round"]`` of
                ``status["spec"]["rounds"]``).
            timeout: if set, seconds after which to give up with
                :class:`dpfl.WatchTimeout` (the job keeps running).
            stall: if set, seconds after which a job whose state and round
                have not changed ends the watch with
                :class:`dpfl.StalledError`.

        Returns:
            The final status; its ``state`` is one of ``completed``,
            ``failed`` (``message`` says why), ``cancelled`` or
            ``budget_exhausted``. Watching does not raise for these.

        Raises:
            NotFound: no such job. Any error of a poll ends the watch.
            WatchTimeout, StalledError: see ``timeout`` and ``stall``.
        """
        start = time.monotonic()
        last: Optional[Tuple[str, int]] = None
        last_change = start
        while True:
            st = self.status(job_id)
            if progress is not None:
                progress(st)
            if is_terminal(st):
                return st
            now = time.monotonic()
            key = (st.get("state", ""), int(st.get("round", 0)))
            if key != last:
                last, last_change = key, now
            elif stall is not None and now - last_change >= stall:
                raise StalledError(
                    "job %s made no progress for %g s: still %s after round %d of %s. The server may have stopped "
                    "running it (look in its log); if its rounds are just slow, allow a longer stall"
                    % (job_id, stall, key[0], key[1], (st.get("spec") or {}).get("rounds", "?")),
                    st,
                    stall,
                )
            if timeout is not None and now - start >= timeout:
                raise WatchTimeout("job %s is still %s at round %d after %g s" % (job_id, key[0], key[1], timeout), st)
            wait = interval
            if timeout is not None:
                wait = max(0.0, min(wait, start + timeout - now))
            time.sleep(wait)

    def metrics(self, job_id: str) -> List[RoundMetrics]:
        """Every committed round's metrics, oldest first
        (GET /v1/jobs/{id}/metrics). Under DP only ``round``, ``epsilon``,
        ``accountant``, ``time``, a fixed cohort's ``selected`` and the test
        score are released.

        Raises:
            NotFound: no such job.
        """
        return self._request("GET", "/v1/jobs/%s/metrics" % _seg(job_id)).get("rounds") or []

    def rounds(self, job_id: str) -> List[RoundRecord]:
        """Every committed round's participation and estimated time on
        devices (GET /v1/jobs/{id}/rounds).

        Raises:
            NotFound: no such job.
        """
        return self._request("GET", "/v1/jobs/%s/rounds" % _seg(job_id)).get("rounds") or []

    def privacy(self, job_id: str) -> PrivacyReport:
        """The job's privacy report (GET /v1/jobs/{id}/privacy): the ledger
        (``events``, one dp_accounting DpEvent per entry and at least one
        per committed round), ``epsilon`` at the job's ``delta`` from the
        tighter valid ``accountant``, both accountants' estimates
        (``accounting``), ``adjacency``, the budget and ``extra_events``.
        Without DP, ``private`` is false and ``note`` says so.

        Raises:
            NotFound: no such job.
        """
        return self._request("GET", "/v1/jobs/%s/privacy" % _seg(job_id))

    def cancel(self, job_id: str) -> JobStatus:
        """Stop a running job (POST /v1/jobs/{id}/cancel) and return its
        status. The round it was in is charged as an extra event.

        Raises:
            NotFound: no such job.
            Conflict: the job has already ended.
            Forbidden: an auditor's token.
        """
        return self._request("POST", "/v1/jobs/%s/cancel" % _seg(job_id))

    def model(self, job_id: str, *, as_numpy: Optional[bool] = None) -> Model:
        """The job's latest global model (GET /v1/jobs/{id}/model).

        Args:
            job_id: the job.
            as_numpy: ``True``: the parameters as a float32
                ``numpy.ndarray``; ``False``: a list of floats; ``None``
                (default): numpy when it is importable.

        Returns:
            A :class:`dpfl.Model`: architecture, round, ``num_params`` d,
            the flat ``params`` (shape (d,)), and the certificate.
            :meth:`dpfl.Model.layers` splits the parameters into the
            architecture's tensors.

        Raises:
            NotFound: no such job, or no model yet.
            ImportError: ``as_numpy=True`` without numpy.
        """
        m = self._request("GET", "/v1/jobs/%s/model" % _seg(job_id))
        params = m.get("params") or []
        n = int(m.get("num_params", len(params)))
        if n != len(params):
            raise DpflError("model of job %s: num_params %d but %d parameters" % (job_id, n, len(params)))
        return Model(
            job_id=m.get("job_id", job_id),
            model=m.get("model", ""),
            round=int(m.get("round", 0)),
            num_params=n,
            params=params_from_json(params, as_numpy),
            certificate=m.get("certificate"),
        )

    def create_budget(self, name: str, epsilon_budget: float, delta: float) -> BudgetReport:
        """Create a shared privacy budget (PUT /v1/budgets/{name}) that DP
        jobs join with ``dp.budget``: every job on it uses its δ, and its
        ε over all their ledgers may not pass ``epsilon_budget``.

        Args:
            name: 1 to 64 bytes of ``[A-Za-z0-9._-]``.
            epsilon_budget: ε_max, > 0.
            delta: δ, in (0, 1).

        Returns:
            The new budget's report (201).

        Raises:
            ValidationError: a bad name, ε_max or δ (``field`` names it).
            Conflict: a budget of that name exists.
            Forbidden: an auditor's token.
        """
        body = json.dumps({"epsilon_budget": epsilon_budget, "delta": delta}, allow_nan=False).encode("utf-8")
        return self._request("PUT", "/v1/budgets/" + _seg(name), body)

    def budget(self, name: str) -> BudgetReport:
        """A shared budget's report (GET /v1/budgets/{name}): its jobs, ε
        spent over their ledgers (both accountants), the rounds running
        jobs have reserved, and the ε still ``remaining`` and
        ``available`` to a new job.

        Raises:
            NotFound: no such budget.
        """
        return self._request("GET", "/v1/budgets/" + _seg(name))

    def budgets(self) -> List[BudgetReport]:
        """Every shared budget's report (GET /v1/budgets).

        Raises:
            NotSupported: the server has no such route (dpfl-server
                before the route existed); look a budget up by name with
                :meth:`budget`.
        """
        try:
            out = self._request("GET", "/v1/budgets")
        except NotFound as e:
            if e.message.strip().lower() == "not found":  # the router's answer: no such route
                raise NotSupported(
                    "this dpfl-server has no route to list budgets (GET /v1/budgets); look one up by name with budget(name)"
                ) from e
            raise
        return (out or {}).get("budgets") or []


def _seg(s: str) -> str:
    """s as one URL path segment."""
    if not isinstance(s, str) or not s:
        raise ValueError("a job ID or budget name must be a non-empty string, got %r" % (s,))
    return urllib.parse.quote(s, safe="")


def _retry_after(v: Optional[str]) -> Optional[float]:
    """A Retry-After given in seconds, or None."""
    if not v:
        return None
    try:
        n = float(v.strip())
    except ValueError:
        return None
    return n if n >= 0 else None


def _is_loopback(base: str) -> bool:
    host = urllib.parse.urlsplit(base).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
