"""Quality-control pages for researchers: a study's per-participant summary and one participant's evidence and
decision (logic in ``annotation.quality``; these views only read and hand decisions over)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from annotation import quality as q
from collection.models import Participant, Study
from datasets.pseudonyms import export_pseudonym, find_participant
from research.access.checks import researcher_required, signed_in_user
from research.studies.safety_log import flagged_participants

SORTS = {"flags": "most flags first", "enrolled": "order of enrolment"}


@researcher_required
def quality_study(request: HttpRequest, slug: str) -> HttpResponse:
    """Every participant of a study with their flags; sortable by flag count (default) or enrolment."""
    study = get_object_or_404(Study, slug=slug)
    summaries = q.study_quality(study)
    sort = request.GET.get("sort", "flags")
    if sort == "enrolled":
        summaries.sort(key=lambda s: (s.participant.created_at, s.participant.pk))
    elif sort in q.FLAG_KINDS:
        summaries.sort(key=lambda s: sort not in s.flag_kinds)
    return render(
        request,
        "research/quality_study.html",
        {
            "study": study,
            "summaries": summaries,
            "counts": q.flag_counts(summaries),
            "kinds": q.FLAG_KINDS,
            "sort": sort,
            "excluded": sum(s.excluded for s in summaries),
            "safety": flagged_participants(study),
        },
    )


@researcher_required
def quality_participant(request: HttpRequest, slug: str, pseudonym: str) -> HttpResponse:
    """One participant's reasons and evidence, the decision form (POST records a decision) and its history.

    The participant is named by the pseudonym exports show (the study page links by it) or the stored one.
    """
    study = get_object_or_404(Study, slug=slug)
    participant = find_participant(Participant.objects.filter(study=study), pseudonym)
    if participant is None:
        raise Http404("No such participant in this study.")
    shown = export_pseudonym(participant.pseudonym)
    error = ""
    if request.method == "POST":
        try:
            q.decide(
                participant,
                request.POST.get("decision", ""),
                signed_in_user(request),
                reason=request.POST.get("reason", ""),
                note=request.POST.get("note", ""),
            )
        except q.QualityError as exc:
            error = str(exc)
        else:
            messages.success(request, f"Decision recorded for {shown}.")
            return redirect("research:quality_participant", slug=slug, pseudonym=shown)
    return render(
        request,
        "research/quality_participant.html",
        {
            "study": study,
            "participant": participant,
            "pseudonym": shown,
            "summary": q.participant_quality(participant, study),
            "history": q.decision_history(participant),
            "reasons": q.EXCLUSION_REASONS,
            "kinds": q.FLAG_KINDS,
            "error": error,
            "posted": request.POST if error else {},
        },
        status=400 if error else 200,
    )
