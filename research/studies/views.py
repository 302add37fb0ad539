"""The study set-up pages: thin views over ``research.studies.setup``.

Researchers see every study; changing one needs the research group's
``collection.change_study`` (adding one ``collection.add_study``), as in the admin.
"""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from collection.models import Study, StudyQuota
from collection.quotas import quota_fill
from research.access.checks import researcher_required, signed_in_user
from research.studies import monitoring
from research.studies.forms import PoolForm, QuotaForm, StatusForm, StudyCreateForm, StudySettingsForm
from research.studies.setup import (
    ALLOWED_TRANSITIONS,
    StudySetupError,
    do_add_quota,
    do_remove_quota,
    do_set_pool,
    do_set_status,
    do_start_preview,
    pool_entries,
    readiness_problems,
    setup_warnings,
)

ADD_PERMISSION = "collection.add_study"
CHANGE_PERMISSION = "collection.change_study"
NOT_ALLOWED = "Your account may not change studies; ask an administrator."


def _may_change(request: HttpRequest) -> bool:
    return signed_in_user(request).has_perm(CHANGE_PERMISSION)


@researcher_required
def study_list(request: HttpRequest) -> HttpResponse:
    studies = Study.objects.annotate(
        n_participants=Count("participants", filter=Q(participants__is_test=False))
    ).order_by("-created_at")
    may_add = signed_in_user(request).has_perm(ADD_PERMISSION)
    return render(request, "research/studies.html", {"studies": studies, "may_add": may_add})


@researcher_required
def study_create(request: HttpRequest) -> HttpResponse:
    if not signed_in_user(request).has_perm(ADD_PERMISSION):
        messages.error(request, "Your account may not add studies; ask an administrator.")
        return redirect("research:studies")
    form = StudyCreateForm(request.POST or None, instance=Study(status=Study.Status.DRAFT))
    if request.method == "POST" and form.is_valid():
        study = form.save()
        messages.success(request, f"Made {study.title} as a draft. Choose its models, preview it, then open it.")
        return redirect("research:study", slug=study.slug)
    return render(request, "research/study_form.html", {"form": form, "creating": True})


@researcher_required
def study_edit(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    may_change = _may_change(request)
    form = StudySettingsForm(request.POST or None, instance=study)
    if request.method == "POST":
        if not may_change:
            messages.error(request, NOT_ALLOWED)
            return redirect("research:study", slug=slug)
        if form.is_valid():
            form.save()
            messages.success(request, "Saved the study's settings.")
            return redirect("research:study", slug=slug)
    context = {
        "study": study,
        "form": form,
        "may_change": may_change,
        "pool_form": PoolForm(entries=pool_entries(study)),
        "quota_form": QuotaForm(study=study),
        "quotas": quota_fill(study),
        "problems": readiness_problems(study),
        "warnings": setup_warnings(study),
        "transitions": [(value, Study.Status(value).label) for value in ALLOWED_TRANSITIONS.get(study.status, ())],
        "join_url": request.build_absolute_uri(reverse("collection:join", kwargs={"slug": study.slug})),
        "monitor": monitoring.study_monitoring(study),
    }
    return render(request, "research/study_edit.html", context)


@researcher_required
@require_POST
def study_status(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    form = StatusForm(request.POST)
    if not _may_change(request):
        messages.error(request, NOT_ALLOWED)
    elif not form.is_valid():
        messages.error(request, "Choose draft, open or closed.")
    else:
        try:
            do_set_status(study, form.cleaned_data["status"])
            messages.success(request, f"The study is now {study.get_status_display().lower()}.")
        except StudySetupError as refusal:
            messages.error(request, str(refusal))
    return redirect("research:study", slug=slug)


@researcher_required
@require_POST
def study_pool(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    if not _may_change(request):
        messages.error(request, NOT_ALLOWED)
        return redirect("research:study", slug=slug)
    form = PoolForm(request.POST, entries=pool_entries(study))
    if not form.is_valid():
        problems = "; ".join(
            f"{form.fields[name].label}: {' '.join(str(e) for e in errs)}" for name, errs in form.errors.items()
        )
        messages.error(request, f"The pool was not changed. {problems}")
        return redirect(reverse("research:study", kwargs={"slug": slug}) + "#pool")
    try:
        pool = do_set_pool(study, form.weights())
    except StudySetupError as refusal:
        messages.error(request, str(refusal))
    else:
        if pool:
            messages.success(request, f"The pool has {len(pool)} model{'s' if len(pool) != 1 else ''}.")
        else:
            messages.success(request, "The pool is empty: every active model is used, equally.")
    return redirect(reverse("research:study", kwargs={"slug": slug}) + "#pool")


@researcher_required
@require_POST
def study_quotas(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    back = reverse("research:study", kwargs={"slug": slug}) + "#quotas"
    if not _may_change(request):
        messages.error(request, NOT_ALLOWED)
        return redirect(back)
    remove = request.POST.get("remove")
    if remove is not None:
        if remove.isdigit() and do_remove_quota(study, int(remove)):
            messages.success(request, "Removed the quota.")
        else:
            messages.error(request, "That quota was already removed.")
        return redirect(back)
    form = QuotaForm(request.POST, study=study)
    if not form.is_valid():
        problems = " ".join(str(e) for errs in form.errors.values() for e in errs)
        messages.error(request, f"The quota was not added. {problems}")
        return redirect(back)
    data = form.cleaned_data
    try:
        quota = do_add_quota(study, data["kind"], data["cap"], data.get("topic"), data.get("group") or "")
    except StudySetupError as refusal:
        messages.error(request, str(refusal))
    else:
        target = str(quota.topic) if quota.kind == StudyQuota.Kind.TOPIC else f"group {quota.group}"
        messages.success(request, f"Quota saved: {target}, at most {quota.cap}.")
    return redirect(back)


@researcher_required
@require_POST
def study_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """Start a preview participant and open the participant flow as them (never counted as data)."""
    study = get_object_or_404(Study, slug=slug)
    participant = do_start_preview(study)
    return redirect("collection:resume", token=participant.token)
