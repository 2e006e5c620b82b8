"""The errors of the dpfl client.

Every error the client raises is a :class:`DpflError`. A non-2xx answer
from dpfl-server is an :class:`HTTPError` of the subclass its status code
names (docs/api.md, "Errors"):

=======  ==========================================================
status   class
=======  ==========================================================
400      :class:`ValidationError` (``errors``: every broken rule)
401      :class:`Unauthorized`
403      :class:`Forbidden`
404      :class:`NotFound`
409      :class:`Conflict`
413      :class:`RequestTooLarge`
429      :class:`TooManyRequests`
503      :class:`Unavailable` (a :class:`ServerError`; ``retry_after``)
5xx      :class:`ServerError` (``error_id``: quote it to the operator)
other    :class:`HTTPError`
=======  ==========================================================

No answer at all is :class:`Timeout` (the server took longer than the
client's ``timeout``) or :class:`ConnectionFailed` (nothing listens, DNS,
TLS). :class:`WatchTimeout` and :class:`StalledError` end a
:meth:`dpfl.Client.watch` that waited too long.
"""

from __future__ import annotations

import http.client
from typing import Any, List, Mapping, NamedTuple, Optional

__all__ = [
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
    "error_for_status",
]


class DpflError(Exception):
    """The base of every error the dpfl client raises."""


class FieldError(NamedTuple):
    """One broken rule of a request, as the server names it.

    Attributes:
        field: the JSON path of the field, e.g. ``"dp.clip_norm"``
            (``"body"`` for the request as a whole).
        rule: the kind of rule broken: ``"range"``, ``"one_of"``,
            ``"required"``, ``"conflict"``, ``"format"``, ``"unknown"``
            (a key that names no field) or ``"capacity"``.
        message: what the rule asks and what the request gave.
    """

    field: str
    rule: str
    message: str


class HTTPError(DpflError):
    """A non-2xx answer from dpfl-server.

    Attributes:
        status: the HTTP status code.
        message: the server's message (its ``error``), or the body's text
            when it is not the JSON error shape.
        field: the JSON path of the offending request field, if the server
            named one, else ``None``.
        error_id: on a 5xx, the ID under which the server logged the
            internal error, else ``None``.
        body: the decoded JSON error body (empty when the body was not
            JSON).
        method, url: the request that failed.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: Optional[str] = None,
        error_id: Optional[str] = None,
        body: Optional[Mapping[str, Any]] = None,
        method: str = "",
        url: str = "",
    ) -> None:
        self.status = status
        self.message = message
        self.field = field
        self.error_id = error_id
        self.body: Mapping[str, Any] = dict(body or {})
        self.method = method
        self.url = url
        super().__init__(self._text())

    def _text(self) -> str:
        reason = http.client.responses.get(self.status, "")
        msg = self.message
        # Older servers began messages with the status again ("conflict: …"
        # under 409 Conflict); say it once, as the Go client does.
        if reason and msg.lower().startswith(reason.lower() + ": "):
            msg = msg[len(reason) + 2 :]
        head = f"server said {self.status} {reason}".rstrip()
        if not msg or msg == reason:
            return head
        return f"{head}: {msg}"


class ValidationError(HTTPError):
    """400: the server refused the request's input.

    For a job submission, ``errors`` holds every broken rule in the
    server's fixed order (data, population, sampling, training, privacy,
    systems); ``field`` and ``message`` repeat the first. A refused
    submission stores nothing.

    Attributes:
        errors: the broken rules as :class:`FieldError` (field, rule,
            message) triples. When the server gave only ``error`` and
            ``field`` (a protocol message refused, a bad budget body), it
            holds that one error with rule ``""``.
    """

    def __init__(self, status: int, message: str, *, errors: Optional[List[FieldError]] = None, **kw: Any) -> None:
        super().__init__(status, message, **kw)
        if not errors and self.field:
            errors = [FieldError(self.field, "", message)]
        self.errors: List[FieldError] = list(errors or [])

    @property
    def fields(self) -> List[str]:
        """The JSON paths of the broken fields, in the server's order."""
        return [e.field for e in self.errors]

    def rule_of(self, field: str) -> Optional[str]:
        """The rule the server says ``field`` breaks, or ``None``."""
        for e in self.errors:
            if e.field == field:
                return e.rule
        return None


class Unauthorized(HTTPError):
    """401: the API token is missing or wrong (set ``$DPFL_TOKEN``)."""


class Forbidden(HTTPError):
    """403: the token may not do this (an auditor's token on a route that
    changes state)."""


class NotFound(HTTPError):
    """404: no such job or budget (or no such route on this server)."""


class Conflict(HTTPError):
    """409: the request does not fit the state: cancelling a job that
    ended, a budget that already exists, a job that does not fit its
    budget's remaining ε."""


class RequestTooLarge(HTTPError):
    """413: the request body is over the server's limit (1 MiB)."""


class TooManyRequests(HTTPError):
    """429: the server runs ``--max-running-jobs`` jobs already (retry when
    one has ended), or a rate limit.

    Attributes:
        retry_after: the server's ``Retry-After`` in seconds, or ``None``.
    """

    def __init__(self, status: int, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        self.retry_after = retry_after
        super().__init__(status, message, **kw)


class ServerError(HTTPError):
    """5xx: the server failed. It logs the cause under ``error_id``."""


class Unavailable(ServerError):
    """503: the server's store (etcd) is unreachable or has lost quorum, or
    no replica leads the job right now (docs/ha.md). A read may simply be
    sent again after ``retry_after`` seconds (the client does so for GETs);
    for a write the outcome is unknown: read before sending it again.

    Attributes:
        retry_after: the server's ``Retry-After`` in seconds, or ``None``.
    """

    def __init__(self, status: int, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        self.retry_after = retry_after
        super().__init__(status, message, **kw)


class Timeout(DpflError, TimeoutError):
    """The server did not answer within the client's ``timeout`` (seconds)."""


class ConnectionFailed(DpflError, ConnectionError):
    """No connection to the server: nothing listening, an unknown host or a
    TLS failure."""


class WatchTimeout(Timeout):
    """A :meth:`dpfl.Client.watch` reached its ``timeout`` before the job
    ended.

    Attributes:
        status: the job's last status seen.
    """

    def __init__(self, message: str, status: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.status = status


class StalledError(DpflError):
    """A :meth:`dpfl.Client.watch` saw the job's state and round stay the
    same for ``stall`` seconds: the server may have stopped running it, or
    a round hangs.

    Attributes:
        status: the job's last status seen.
        stall: the stall limit, in seconds.
    """

    def __init__(self, message: str, status: Mapping[str, Any], stall: float) -> None:
        super().__init__(message)
        self.status = status
        self.stall = stall


class NotSupported(DpflError):
    """The server has no route for this call (an older or newer API)."""


_BY_STATUS = {
    400: ValidationError,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: RequestTooLarge,
    429: TooManyRequests,
}


def error_for_status(
    status: int,
    body: Mapping[str, Any],
    text: str,
    *,
    method: str = "",
    url: str = "",
    retry_after: Optional[float] = None,
) -> HTTPError:
    """Build the :class:`HTTPError` subclass for a non-2xx answer.

    Args:
        status: the HTTP status code.
        body: the decoded JSON body (``{}`` if it was not JSON).
        text: the raw body text, the message when ``body`` has no ``error``.
        method, url: the request, for the error's attributes.
        retry_after: a 429's or 503's ``Retry-After`` in seconds.
    """
    message = body.get("error") if isinstance(body.get("error"), str) else ""
    if not message:
        message = text.strip()
    field = body.get("field") if isinstance(body.get("field"), str) and body.get("field") else None
    error_id = body.get("error_id") if isinstance(body.get("error_id"), str) and body.get("error_id") else None
    kw: dict = dict(field=field, error_id=error_id, body=body, method=method, url=url)
    if status == 400:
        errs = []
        for e in body.get("errors") or []:
            if isinstance(e, Mapping):
                errs.append(FieldError(str(e.get("field", "")), str(e.get("rule", "")), str(e.get("message", ""))))
        return ValidationError(status, message, errors=errs, **kw)
    if status == 429:
        return TooManyRequests(status, message, retry_after=retry_after, **kw)
    if status == 503:
        return Unavailable(status, message, retry_after=retry_after, **kw)
    if status >= 500:
        return ServerError(status, message, **kw)
    return _BY_STATUS.get(status, HTTPError)(status, message, **kw)
