"""Replaying finished conversations against evaluated models (SPEC 4).

Pure benchmark core: nothing here imports Django, and litellm is imported only
when a real model is called. The pieces, each in its own module:

- ``prompts``   our versioned prompt set (PROMPT_VERSION) and message builders
- ``parsing``   lenient JSON extraction and per-call validation
- ``protocol``  the per-turn / post-conversation protocol producing RunOutput
- ``llm``       model specs and the litellm backend
- ``scheduler`` global and per-provider concurrency, rpm, backoff with jitter
- ``cache``     call cache keyed by sha256(model, params, messages, prompt version)
- ``baselines`` offline evaluated models answering through the same protocol
- ``aio``       one persistent event loop per process for sync callers
"""

from attunebench.replay.prompts import PROMPT_VERSION

__all__ = ["PROMPT_VERSION"]
