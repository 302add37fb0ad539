"""Nothing a participant typed is lost: post/redirect/get after refusals, and calm pages for stale tabs.

Three small tools the participant views share:

- **Refused forms redirect too.** A form with errors keeps what was sent in
  the session and redirects to the same page, which shows it again with the
  errors (``bounce`` / ``bounced``). The Back button then never offers to
  "Confirm Form Resubmission".
- **One submission, recognised twice.** Every rendered form carries a random
  ``form_nonce``. The first request that posts it claims it (``claim``); a
  second post of the same page (a double click) is recognised and handled as
  before: idempotently, by showing the current step.
- **A stale tab is told so.** A post from a page the study has moved past (the
  same link open in two tabs, the other one went ahead) whose nonce was never
  used is not a double click: instead of silently dropping it, the participant
  gets a calm page saying nothing was saved from it, with their text in a box to
  copy (``render_stale``).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render

#: Posted by every participant form (templates/participant/includes/form_guard.html).
NONCE_FIELD = "form_nonce"
#: How long a claimed nonce is remembered: longer than anyone leaves a second tab open and then double-clicks.
NONCE_SECONDS = 24 * 3600

#: Free-text fields whose contents a stale page shows back, with the label the participant saw.
TEXT_FIELDS: dict[str, str] = {
    "message": "Your message",
    "human_edited": "The reply you would have wanted",
    "felt_off_other": "Anything else that felt off",
    "comment": "Your comment to the researchers",
}

_BOUNCE_PREFIX = "attune-refused:"


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def _nonce_key(nonce: str) -> str:
    return f"attune:form-nonce:{nonce}"


def claim(request: HttpRequest) -> bool:
    """True when this post's nonce is new (now claimed); False for a repeat, or a post without one."""
    nonce = request.POST.get(NONCE_FIELD, "")
    if not nonce or len(nonce) > 64:
        return False
    return bool(cache.add(_nonce_key(nonce), 1, timeout=NONCE_SECONDS))


def bounce(request: HttpRequest, form: Any = None, target: str = "") -> HttpResponse:
    """Keep a refused post (minus the CSRF token) and its errors for the next GET of the page; redirect there."""
    target = target or request.get_full_path()
    data = {k: v for k, v in request.POST.lists() if k not in ("csrfmiddlewaretoken", NONCE_FIELD)}
    errors = {k: [str(e) for e in v] for k, v in form.errors.items()} if form is not None else {}
    request.session[_BOUNCE_PREFIX + target.split("?")[0]] = {"data": data, "errors": errors}
    return redirect(target)


def bounced(request: HttpRequest) -> tuple[QueryDict | None, dict[str, list[str]]]:
    """The refused post kept for this page (once), as form data, and the errors it had."""
    kept = request.session.pop(_BOUNCE_PREFIX + request.path, None)
    if not isinstance(kept, dict):
        return None, {}
    data = QueryDict(mutable=True)
    for key, values in (kept.get("data") or {}).items():
        data.setlist(key, [str(v) for v in values])
    return data, dict(kept.get("errors") or {})


def restore_errors(form: Any, errors: dict[str, list[str]]) -> None:
    """Show errors that validation alone would not find again (e.g. "sending too quickly")."""
    form.is_valid()
    for field, messages in errors.items():
        name = None if field == "__all__" else field
        if name is not None and name not in form.fields:
            continue
        present = form.errors.get(field or "__all__", [])
        for message in messages:
            if message not in present:
                form.add_error(name, message)


def stale_texts(request: HttpRequest) -> list[tuple[str, str, str]]:
    """(field name, label, text) of every non-empty free-text box in the post."""
    found = []
    for name in request.POST:
        value = str(request.POST.get(name, ""))
        label = TEXT_FIELDS.get(name) or ("Your text" if name.endswith(("_other", "_text")) else "")
        if label and value.strip():
            found.append((name, label, value))
    return found


def render_stale(request: HttpRequest, context: dict[str, Any], resume_url: str) -> HttpResponse:
    """The calm page for a post from an out-of-date tab: nothing from it saved, its text kept to copy."""
    return render(
        request,
        "participant/stale.html",
        {**context, "texts": stale_texts(request), "resume_url": resume_url, "progress": None},
        status=409,
    )
