"""The model-call cache: a re-run of the same job never pays twice.

Entries are keyed by sha256 of everything that can change an answer: the
model string, the parameters that change answers, the messages, the prompt
version and, for a model served at its own endpoint, that endpoint (so two
checkpoints served under one name at two addresses never answer for each
other), and a repeat index for runs that measure sampling variance. The same
formula serves ``scoring.models.ModelCallCache.make_key``, so the Django
backend and these pure backends agree on keys. A model at the provider's own
endpoint, on its first repeat, keeps the key it had before endpoints were part
of it; an entry written without an endpoint is never found for a model that has
one. Only *validated* answers are
stored, under the key of the original request, so a re-run finds the answer
even when it took a corrective retry to get it.

Backends here are pure (no Django): in-memory for tests and the benchmark, and
a directory of JSON files for command-line use without a database. The
database and Redis backends live in ``scoring/replay_service.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

#: How manifests name the endpoint of a model served at its provider's own address (no ``api_base``).
PROVIDER_ENDPOINT = "the provider's own"


def normalise_endpoint(api_base: str | None) -> str:
    """Where a model is served, as the cache names it; "" for the provider's own endpoint.

    Scheme and host are lower-cased, a default port and trailing slashes dropped, so one server written
    two ways is one endpoint. Never a key or credentials: an address with a user part keeps only the host.
    """
    if not api_base or not api_base.strip():
        return ""
    parts = urlsplit(api_base.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a port number: kept as written, so the address stays its own endpoint
        port = None
        host = parts.netloc.rpartition("@")[2].lower()
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    # The query is left out: providers that take a key in it (?key=...) must never see it written down.
    return urlunsplit((scheme, host, parts.path.rstrip("/"), "", ""))


def make_key(
    model: str,
    params: dict[str, Any],
    messages: list[dict[str, Any]],
    prompt_version: str,
    endpoint: str = "",
    repeat: int = 0,
) -> str:
    """sha256 hex of the canonical JSON of the request's identity.

    ``params`` must hold only what changes the answer (temperature, max_tokens, seed, ...), never secrets;
    ``endpoint`` is ``normalise_endpoint(api_base)``; ``repeat`` numbers the repeats of one run (0 first).
    """
    identity: list[Any] = [model, params, messages, prompt_version]
    served = {name: value for name, value in (("endpoint", endpoint), ("repeat", repeat)) if value}
    if served:
        identity.append(served)
    payload = json.dumps(identity, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedCall:
    """A validated answer and what it cost when it was first obtained."""

    model: str
    prompt_version: str
    response: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    # Who paid for it (a replayer's ``paid_tag``, e.g. one attempt at one run conversation) and how many
    # requests it took (parse retries included): a later attempt of the same conversation tells its own
    # interrupted attempt's answers from another run's, and counts them as paid, once.
    paid_by: str | None = None
    requests: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CachedCall:
        return cls(
            model=str(data.get("model", "")),
            prompt_version=str(data.get("prompt_version", "")),
            response=str(data["response"]),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            cost_usd=data.get("cost_usd"),
            paid_by=data.get("paid_by"),
            requests=int(data.get("requests") or 1),
        )


class CallCache(Protocol):
    """Async get/set so that network-backed caches do not block the event loop."""

    async def get(self, key: str) -> CachedCall | None: ...

    async def set(self, key: str, value: CachedCall) -> None: ...


class FreshCache:
    """Asks the provider again (every read misses) but keeps what it answers, so a fresh run that is
    interrupted resumes from its own answers: for a model updated behind an unchanged name."""

    def __init__(self, inner: CallCache) -> None:
        self.inner = inner
        self._written: set[str] = set()

    async def get(self, key: str) -> CachedCall | None:
        return await self.inner.get(key) if key in self._written else None

    async def set(self, key: str, value: CachedCall) -> None:
        self._written.add(key)
        await self.inner.set(key, value)


class OwnAnswersCache:
    """Answers only with what ``owns`` says was paid for by the caller (its ``paid_by`` tag); writes through.

    For a run asked to call afresh (a model updated behind its name): it never reuses an answer another
    run paid for, yet an interrupted attempt still finds the answers the run itself already paid for.
    """

    def __init__(self, inner: CallCache, owns: Callable[[str], bool]) -> None:
        self.inner = inner
        self.owns = owns

    async def get(self, key: str) -> CachedCall | None:
        value = await self.inner.get(key)
        if value is None or value.paid_by is None or not self.owns(value.paid_by):
            return None
        return value

    async def set(self, key: str, value: CachedCall) -> None:
        await self.inner.set(key, value)


class NullCache:
    """Never remembers anything (``--no-cache`` and offline baselines)."""

    async def get(self, key: str) -> CachedCall | None:
        return None

    async def set(self, key: str, value: CachedCall) -> None:
        return None


class MemoryCache:
    """At most ``maxsize`` entries, the least recently used dropped first; counts hits and misses.

    Bounded because a worker process keeps one for its whole life.
    """

    def __init__(self, maxsize: int = 10_000) -> None:
        if maxsize < 1:
            raise ValueError(f"MemoryCache maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self._entries: OrderedDict[str, CachedCall] = OrderedDict()
        self.hits = 0
        self.misses = 0

    async def get(self, key: str) -> CachedCall | None:
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
            self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: CachedCall) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class FileCache:
    """One JSON file per entry under ``root/ab/<key>.json``.

    Writes go to a temporary file that is renamed into place, so a killed
    process never leaves a half-written entry and concurrent writers of the
    same key (same answer) cannot corrupt each other. Files are small, so
    they are read and written inline: a thread hop would cost more than the I/O.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    async def get(self, key: str) -> CachedCall | None:
        path = self._path(key)
        try:
            return CachedCall.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            return None  # a damaged entry is a miss; the next set replaces it

    async def set(self, key: str, value: CachedCall) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(value.to_dict(), stream, ensure_ascii=False)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


class LayeredCache:
    """A fast cache in front of a slower shared one (e.g. memory over database).

    Reads try the layers in order and copy a hit into the faster layers;
    writes go to every layer.
    """

    def __init__(self, *layers: CallCache) -> None:
        if not layers:
            raise ValueError("LayeredCache needs at least one layer")
        self.layers = layers

    async def get(self, key: str) -> CachedCall | None:
        for position, layer in enumerate(self.layers):
            value = await layer.get(key)
            if value is not None:
                if position:
                    await asyncio.gather(*(faster.set(key, value) for faster in self.layers[:position]))
                return value
        return None

    async def set(self, key: str, value: CachedCall) -> None:
        await asyncio.gather(*(layer.set(key, value) for layer in self.layers))
