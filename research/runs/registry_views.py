"""The model registry of the researcher pages.

Researchers add and edit rows as the research group's permissions allow
(``scoring.add_evaluatedmodel`` / ``change_evaluatedmodel``); where a model is
called (``api_base``) and its ``params`` (the key variable among them) are the
superuser's alone, as in the admin. Validation is the model's own, so the admin
and these pages refuse the same rows; params are only ever shown scrubbed.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from attunebench.replay.llm import scrub_params
from research.access.checks import researcher_required, signed_in_user
from research.runs.forms import EvaluatedModelForm
from scoring.connection_check import do_test_connection
from scoring.models import EvaluatedModel

ADD_PERMISSION = "scoring.add_evaluatedmodel"
CHANGE_PERMISSION = "scoring.change_evaluatedmodel"


@researcher_required
def model_registry(request: HttpRequest) -> HttpResponse:
    """GET: every registered model, and the add form where allowed. POST: add a model."""
    user = signed_in_user(request)
    may_add = user.has_perm(ADD_PERMISSION)
    form = None
    if may_add:
        form = EvaluatedModelForm(request.POST or None, superuser=user.is_superuser)
        if request.method == "POST" and form.is_valid():
            model = form.save()
            messages.success(request, f"Added {model.name}. Test its connection before launching a run.")
            return redirect("research:model", model_id=model.pk)
    elif request.method == "POST":
        messages.error(request, "Your account may not add models; ask an administrator.")
        return redirect("research:models")
    models = list(EvaluatedModel.objects.order_by("kind", "name"))
    for model in models:
        model.params_shown = scrub_params(model.params or {})  # type: ignore[attr-defined]
    return render(request, "research/models.html", {"models": models, "form": form})


@researcher_required
def model_edit(request: HttpRequest, model_id: int) -> HttpResponse:
    """GET: one model, editable where allowed. POST: save the change."""
    user = signed_in_user(request)
    model = get_object_or_404(EvaluatedModel, pk=model_id)
    may_change = user.has_perm(CHANGE_PERMISSION)
    form = None
    if may_change:
        form = EvaluatedModelForm(request.POST or None, instance=model, superuser=user.is_superuser)
        if request.method == "POST" and form.is_valid():
            form.save()
            messages.success(request, f"Saved {model.name}.")
            return redirect("research:model", model_id=model.pk)
    elif request.method == "POST":
        messages.error(request, "Your account may not change models; ask an administrator.")
        return redirect("research:model", model_id=model.pk)
    if request.method == "POST":
        # The form's errors are shown on the instance as posted; read the stored row for the summary.
        model = EvaluatedModel.objects.get(pk=model.pk)
    context = {
        "model": model,
        "params_shown": scrub_params(model.params or {}),
        "form": form,
        "superuser": user.is_superuser,
    }
    return render(request, "research/model_detail.html", context)


@researcher_required
@require_POST
def model_test(request: HttpRequest, model_id: int) -> HttpResponse:
    """One small real call to the model (scoring.connection_check); the result as a fragment for htmx."""
    model = get_object_or_404(EvaluatedModel, pk=model_id)
    result = do_test_connection(model)
    return render(request, "research/_connection_result.html", {"model": model, "result": result})


# ---------------------------------------------------------------------------
# The researcher's own API token (research.access.api_tokens)
# ---------------------------------------------------------------------------
