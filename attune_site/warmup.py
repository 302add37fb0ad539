"""Pay start-up costs at start-up, not on a participant's first request.

Left lazy, the first live reply after a restart imported litellm and loaded
its tokenizer (seconds), the URL configuration with every view module, and
compiled each template. The
serve command and the WSGI module (gunicorn) call ``warm_up`` once per process
before taking requests; ``bench/first_request.py`` measures the difference.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time

from django.conf import settings
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.urls import get_resolver

from attunebench.replay.llm import WARM_UP_MODEL
from attunebench.safety import compile_patterns

logger = logging.getLogger("attune.warmup")

#: Templates of the participant's first pages, compiled (and cached by the cached loader) ahead of time.
PARTICIPANT_TEMPLATES: tuple[str, ...] = (
    "participant/join.html",
    "participant/consent.html",
    "participant/profile.html",
    "participant/panas.html",
    "participant/topic.html",
    "participant/chat.html",
    "participant/annotate_answers.html",
    "participant/stale.html",
    "errors/error.html",
)


def _warm_litellm() -> None:
    """Import litellm and run one offline (mock) streamed completion and a token count.

    Beyond its import, litellm loads more modules and a tokenizer on its first
    call (about 5 s on a busy 2-core machine); ``mock_response`` makes that call
    without any network. It runs on its own thread and event loop, so it never
    touches a loop the server may be running.
    """
    litellm = importlib.import_module("litellm")

    async def once() -> None:
        response = await litellm.acompletion(
            model=WARM_UP_MODEL,
            messages=[{"role": "user", "content": "warm-up"}],
            stream=True,
            mock_response="ok",
            num_retries=0,
            max_retries=0,
        )
        async for _ in response:
            pass
        litellm.token_counter(model="gpt-4o", messages=[{"role": "user", "content": "warm-up"}])

    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(once())
        except BaseException as exc:  # reported by the caller
            failure.append(exc)

    thread = threading.Thread(target=run, name="attune-warm-up")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def warm_up(live_models: bool | None = None) -> dict[str, float]:
    """Import and build what the first requests would otherwise wait for; seconds per part.

    litellm is imported when live models are allowed (``ATTUNE_ALLOW_LIVE_MODELS``),
    or when ``live_models`` says so.
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    get_resolver().url_patterns  # noqa: B018  (imports every view module)
    timings["urls"] = time.perf_counter() - start

    start = time.perf_counter()
    for name in PARTICIPANT_TEMPLATES:
        try:
            get_template(name)
        except TemplateDoesNotExist:
            logger.warning("warm-up: template %s not found", name)
    timings["templates"] = time.perf_counter() - start

    start = time.perf_counter()
    compile_patterns()  # the risk screen's, otherwise compiled on first use: every message is screened
    timings["safety"] = time.perf_counter() - start

    if settings.ATTUNE_ALLOW_LIVE_MODELS if live_models is None else live_models:
        start = time.perf_counter()
        try:
            _warm_litellm()
        except Exception:  # a warm-up must never stop the site from starting
            logger.warning("warm-up: litellm could not be warmed; the first live reply will be slower", exc_info=True)
        timings["litellm"] = time.perf_counter() - start
    logger.info("warm-up: %s", ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    return timings
