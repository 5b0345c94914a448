"""HTTP for the server probe (standard library only): one client with bounded retries, and the
fault every request raises when it fails for good.

Idempotent reads are retried on any transient fault; generation requests only when the server
refused the connection or answered 429/503 (the request was not processed, so the counters are not
double-counted).
"""

from __future__ import annotations

import http.client
import json
import math
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


@dataclass
class HttpClient:
    """Bounded-retry JSON/text client for one server."""

    base: str
    timeout: float = 60.0
    retries: int = 3  # extra attempts after the first
    backoff: float = 0.5  # seconds, doubled per attempt, capped at 5 s
    sleep: Callable[[float], None] = time.sleep
    requests: int = 0
    retried: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _count(self, retry: bool) -> None:
        with self._lock:
            self.requests += 1
            if retry:
                self.retried += 1

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
            retryable = False
            try:
                # normalise_url admits http(s) only
                req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)  # noqa: S310
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                    body = resp.read(MAX_RESPONSE_BYTES + 1)
                    if len(body) > MAX_RESPONSE_BYTES:
                        raise ServerFault(
                            "SERVER_BAD_RESPONSE",
                            f"{what}: answer larger than {MAX_RESPONSE_BYTES // 2**20} MiB",
                            {"request": what},
                        )
                    return int(resp.status), body
            except urllib.error.HTTPError as exc:
                try:
                    body = exc.read(2000)
                except Exception:
                    body = b""
                if exc.code in allow:
                    return int(exc.code), body
                retryable = exc.code in (429, 503) or (idempotent and exc.code in (500, 502, 504))
                fault = ServerFault(
                    "SERVER_HTTP_ERROR",
                    f"{what}: HTTP {exc.code} {exc.reason}" + (f": {_excerpt(body)}" if body else ""),
                    {"request": what, "status": exc.code, "body": _excerpt(body, 1000)},
                )
            except TimeoutError:  # socket.timeout is TimeoutError
                retryable = idempotent
                fault = ServerFault(
                    "SERVER_TIMEOUT",
                    f"{what}: no answer within {self.timeout:g} s",
                    {"request": what, "timeout_s": self.timeout},
                )
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, TimeoutError):
                    retryable = idempotent
                    fault = ServerFault(
                        "SERVER_TIMEOUT",
                        f"{what}: no connection within {self.timeout:g} s",
                        {"request": what, "timeout_s": self.timeout},
                    )
                else:
                    refused = isinstance(reason, ConnectionRefusedError)
                    retryable = idempotent or refused
                    fault = ServerFault(
                        "SERVER_UNREACHABLE",
                        f"{what}: {reason}",
                        {"request": what, "reason": str(reason), "refused": refused},
                    )
            except ServerFault:
                raise
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                retryable = idempotent
                fault = ServerFault(
                    "SERVER_UNREACHABLE",
                    f"{what}: connection lost ({type(exc).__name__}: {exc})",
                    {"request": what, "reason": f"{type(exc).__name__}: {exc}"},
                )
            if not retryable or attempt > self.retries:
                fault.evidence["attempts"] = attempt
                raise fault
            self.sleep(min(self.backoff * 2 ** (attempt - 1), 5.0))

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


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"{what}: answer is not JSON ({type(exc).__name__}: {exc}): {_excerpt(body)!r}",
            {"request": what, "body": _excerpt(body, 1000)},
        ) from None


def nonneg_int(x: Any, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 or x != int(x):
        raise ServerFault(
            "SERVER_BAD_RESPONSE",
            f"POST /generate: meta_info.{what} = {x!r} is not a count",
            {"request": "POST /generate", "field": what},
        )
    return int(x)


def run_requests(items: Sequence[Any], fn: Callable[[Any], Any], concurrency: int) -> list[Any]:
    """Run ``fn`` over ``items`` with ``concurrency`` workers; the first fault stops new requests."""
    stop = threading.Event()

    def guarded(item: Any) -> Any:
        if stop.is_set():
            return None
        try:
            return fn(item)
        except ServerFault:
            stop.set()
            raise

    if concurrency == 1:
        return [fn(item) for item in items]
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
