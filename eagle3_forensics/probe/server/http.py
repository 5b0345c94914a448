"""HTTP for the server probe (standard library only): one client with deadlines and bounded retries,
and the fault every request raises when it fails for good.

Each attempt has one deadline for connect, send and the *whole* answer (``timeout``): a watchdog shuts
the socket when it passes, so a server that trickles its headers or body a byte at a time is cut off,
not waited on forever (a socket timeout alone bounds each read, not the request). The run has its own
budget (``budget``) that every attempt, retry and back-off draws from. Idempotent reads are retried on
any transient fault; generation requests only when the server refused the connection or answered
429/503 (the request was not processed, so the counters are not double-counted).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from eagle3_forensics.errors import UnusableInputError

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 20


class ServerFault(Exception):
    """A request that failed for good (after the bounded retries)."""

    def __init__(self, code: str, message: str, evidence: dict[str, Any] | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.code = code
        self.evidence = dict(evidence or {})


def normalise_url(url: str) -> str:
    if not isinstance(url, str) or not url.strip():
        raise UnusableInputError("no server URL given")
    u = url.strip().rstrip("/")
    if "://" not in u:
        u = "http://" + u
    parts = urllib.parse.urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UnusableInputError(f"not an http(s) URL: {url!r}")
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise UnusableInputError(f"bad port in URL {url!r}") from None
    return u


def _excerpt(data: bytes, n: int = 300) -> str:
    return " ".join(data[:n].decode("utf-8", "replace").split())


# -- the per-attempt deadline ---------------------------------------------------------------------


class _Watch:
    """Shuts the connection of one attempt when its deadline passes (a trickle cannot outlive it).

    It holds a duplicate of each socket: ``shutdown`` on the duplicate ends the connection for every
    descriptor, including the one TLS wrapped during the handshake."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for s in self._socks:
                with contextlib.suppress(OSError):  # already closed: nothing left to cut off
                    s.shutdown(socket.SHUT_RDWR)

    def register(self, sock: socket.socket) -> None:
        with self._lock:
            dup = sock.dup()
            self._socks.append(dup)
            if self.expired:
                with contextlib.suppress(OSError):
                    dup.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()
        with self._lock:
            for s in self._socks:
                s.close()
            self._socks.clear()


def _opener(watch: _Watch) -> urllib.request.OpenerDirector:
    """urllib's usual opener (proxies from the environment, redirects with its loop bound) whose
    connections register their sockets with ``watch`` as soon as they exist (before any TLS)."""

    def connect(*args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.create_connection(*args, **kwargs)
        watch.register(sock)
        return sock

    class Conn(http.client.HTTPConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = connect

    class TlsConn(http.client.HTTPSConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = connect

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Conn, req)

    class TlsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(TlsConn, req)

    class NoFtp(urllib.request.FTPHandler):
        """urllib follows a redirect to ftp://, whose reads no deadline here bounds: refused."""

        def ftp_open(self, req: urllib.request.Request) -> Any:
            raise _NotHttp(req.full_url)

    return urllib.request.build_opener(Handler, TlsHandler, NoFtp)


class _NotHttp(Exception):
    """A redirect to a URL that is not http(s) (urllib itself refuses file: and data:)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url[:200]


def _read_body(resp: Any, what: str) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read(_CHUNK)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ServerFault(
                "SERVER_BAD_RESPONSE",
                f"{what}: answer larger than {MAX_RESPONSE_BYTES // 2**20} MiB",
                {"request": what, "limit_bytes": MAX_RESPONSE_BYTES},
            )


# -- the client -----------------------------------------------------------------------------------


@dataclass
class HttpClient:
    """Deadline-bounded, bounded-retry JSON/text client for one server.

    ``timeout``: seconds for one attempt, connect to last byte. ``budget``: seconds for every request
    of the run together (``None``: unbounded), counted from the first request."""

    base: str
    timeout: float = 60.0
    retries: int = 3  # extra attempts after the first
    backoff: float = 0.5  # seconds, doubled per attempt, capped at 5 s
    sleep: Callable[[float], None] = time.sleep
    budget: float | None = None
    clock: Callable[[], float] = time.monotonic
    requests: int = 0
    retried: int = 0
    _started: float | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _count(self, retry: bool) -> None:
        with self._lock:
            if self._started is None:
                self._started = self.clock()
            self.requests += 1
            if retry:
                self.retried += 1

    @property
    def elapsed(self) -> float:
        return 0.0 if self._started is None else self.clock() - self._started

    def remaining(self) -> float:
        """Seconds left of the run budget (``inf`` without one)."""
        return math.inf if self.budget is None else self.budget - self.elapsed

    def _budget_spent(self, what: str, attempt: int) -> ServerFault:
        return ServerFault(
            "SERVER_TIMEOUT",
            f"{what}: the run budget of {self.budget:g} s (--budget) was spent after {self.elapsed:.1f} s "
            f"waiting for this answer (attempt {attempt})",
            {
                "request": what,
                "budget_s": self.budget,
                "elapsed_s": round(self.elapsed, 3),
                "attempts": attempt,
            },
        )

    def request(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        idempotent: bool = True,
        allow: Sequence[int] = (),
    ) -> tuple[int, bytes]:
        """Send a request; returns (status, body). Statuses in ``allow`` are returned, not raised."""
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Accept": "application/json, text/plain;q=0.9"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        what = f"{method} {path}"
        attempt = 0
        while True:
            attempt += 1
            self._count(attempt > 1)
            left = self.remaining()
            if left <= 0:
                raise self._budget_spent(what, attempt)
            limit = min(self.timeout, left)
            by_budget = limit < self.timeout
            try:
                return self._attempt(method, path, data, headers, limit, allow)
            except _Retry as r:
                retryable = r.retryable(idempotent)
                fault = r.fault
                if fault.code == "SERVER_TIMEOUT" and by_budget:
                    fault = self._budget_spent(what, attempt)
                    retryable = False
            if not retryable or attempt > self.retries:
                fault.evidence["attempts"] = attempt
                raise fault
            pause = min(self.backoff * 2 ** (attempt - 1), 5.0)
            if pause >= self.remaining():
                fault.evidence["attempts"] = attempt
                raise fault
            self.sleep(pause)

    def _attempt(
        self,
        method: str,
        path: str,
        data: bytes | None,
        headers: dict[str, str],
        limit: float,
        allow: Sequence[int],
    ) -> tuple[int, bytes]:
        """One attempt within ``limit`` seconds, connect to last byte; a transient fault is a :class:`_Retry`."""
        what = f"{method} {path}"
        watch = _Watch(limit)
        try:
            # normalise_url admits http(s) only
            req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)  # noqa: S310
            with _opener(watch).open(req, timeout=limit) as resp:
                body = _read_body(resp, what)
                if watch.expired:
                    raise _timeout(what, limit)
                return int(resp.status), body
        except urllib.error.HTTPError as exc:
            if watch.expired:
                raise _timeout(what, limit) from None
            return _http_error(exc, what, allow)
        except (ServerFault, _Retry):
            raise
        except _NotHttp as exc:
            raise _Retry(
                ServerFault(
                    "SERVER_HTTP_ERROR",
                    f"{what}: redirected to {exc.url!r}, not an http(s) URL",
                    {"request": what, "location": exc.url},
                ),
                idempotent=False,
            ) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:  # urllib's and http.client's faults
            if watch.expired or isinstance(exc, TimeoutError) or _timed_out(exc):
                raise _timeout(what, limit) from None
            raise _transport(exc, what) from None
        finally:
            watch.cancel()

    def get_json(self, path: str, *, allow: Sequence[int] = ()) -> tuple[int, Any]:
        status, body = self.request("GET", path, allow=allow)
        return status, (_json(body, f"GET {path}") if status < 400 else None)

    def post_json(self, path: str, payload: Any) -> Any:
        _, body = self.request("POST", path, payload, idempotent=False)
        return _json(body, f"POST {path}")

    def get_text(self, path: str, *, allow: Sequence[int] = ()) -> tuple[int, str]:
        status, body = self.request("GET", path, allow=allow)
        try:
            return status, body.decode("utf-8")
        except UnicodeDecodeError:
            raise ServerFault(
                "SERVER_BAD_RESPONSE", f"GET {path}: answer is not UTF-8 text", {"request": f"GET {path}"}
            ) from None


class _Retry(Exception):
    """A failed attempt: the fault, and whether a retry may help (``always`` or for idempotent reads)."""

    def __init__(self, fault: ServerFault, *, always: bool = False, idempotent: bool = True) -> None:
        super().__init__(str(fault))
        self.fault, self.always, self.if_idempotent = fault, always, idempotent

    def retryable(self, idempotent: bool) -> bool:
        return self.always or (idempotent and self.if_idempotent)


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, TimeoutError)


def _timeout(what: str, limit: float) -> _Retry:
    return _Retry(
        ServerFault(
            "SERVER_TIMEOUT",
            f"{what}: no complete answer within {limit:g} s (connect, send and the whole answer; --timeout)",
            {"request": what, "timeout_s": limit},
        )
    )


def _http_error(exc: urllib.error.HTTPError, what: str, allow: Sequence[int]) -> tuple[int, bytes]:
    try:
        body = exc.read(2000)
    except Exception:  # the error body is evidence only
        body = b""
    if exc.code in allow:
        return int(exc.code), body
    fault = ServerFault(
        "SERVER_HTTP_ERROR",
        f"{what}: HTTP {exc.code} {exc.reason}" + (f": {_excerpt(body)}" if body else ""),
        {"request": what, "status": exc.code, "body": _excerpt(body, 1000)},
    )
    raise _Retry(fault, always=exc.code in (429, 503), idempotent=exc.code in (500, 502, 504))


def _transport(exc: Exception, what: str) -> _Retry:
    """A failure below HTTP: refused, dropped, or an answer http.client cannot parse."""
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        refused = isinstance(reason, ConnectionRefusedError)
        return _Retry(
            ServerFault(
                "SERVER_UNREACHABLE",
                f"{what}: {reason}",
                {"request": what, "reason": str(reason), "refused": refused},
            ),
            always=refused,
        )
    if isinstance(exc, http.client.HTTPException) and not isinstance(
        exc, (http.client.IncompleteRead, ConnectionError)
    ):
        # an oversized header line, too many headers, a status line that is not HTTP: not transient
        return _Retry(
            ServerFault(
                "SERVER_BAD_RESPONSE",
                f"{what}: not an HTTP answer ({type(exc).__name__}: {_clip(exc)})",
                {"request": what, "reason": f"{type(exc).__name__}: {_clip(exc)}"},
            ),
            idempotent=False,
        )
    return _Retry(
        ServerFault(
            "SERVER_UNREACHABLE",
            f"{what}: connection lost ({type(exc).__name__}: {_clip(exc)})",
            {"request": what, "reason": f"{type(exc).__name__}: {_clip(exc)}"},
        )
    )


def _clip(exc: Exception, n: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= n else text[:n] + "…"


# JSON bounds no number's digits: an integer longer than this (beyond float range from 309 digits; Python
# refuses to read one of more than 4300) is read as a float, infinite, so every check downstream sees a
# number that is not finite rather than an int that no float holds.
_INT_DIGITS = 300


def _int(text: str) -> int | float:
    return int(text) if len(text) <= _INT_DIGITS else float(text)


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"), parse_int=_int)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what}: answer is not JSON ({type(exc).__name__}: {exc}): {_excerpt(body)!r}",
            {"request": what, "body": _excerpt(body, 1000)},
        ) from None


def run_requests(
    items: Sequence[Any],
    fn: Callable[[Any], Any],
    concurrency: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Any]:
    """Run ``fn`` over ``items`` with ``concurrency`` workers; the first fault stops new requests.
    ``progress(done, total)`` is called after each item."""
    stop = threading.Event()
    done = [0]
    lock = threading.Lock()

    def guarded(item: Any) -> Any:
        if stop.is_set():
            return None
        try:
            out = fn(item)
        except ServerFault:
            stop.set()
            raise
        with lock:
            done[0] += 1
            n = done[0]
        if progress is not None:
            progress(n, len(items))
        return out

    if concurrency == 1:
        return [guarded(item) for item in items]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(guarded, item) for item in items]
        results, first = [], None
        for fut in futures:
            try:
                results.append(fut.result())
            except ServerFault as fault:
                first = first or fault
                results.append(None)
    if first is not None:
        raise first
    return results
