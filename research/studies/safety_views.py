"""The study's safety log page, and its CSV for the ethics report (logic in research.studies.safety_log)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from collection import safety_model
from collection.models import Study
from research.access.checks import researcher_required
from research.studies.safety_log import level_counts, safety_csv, safety_log


@researcher_required
@require_GET
def study_safety(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(Study, slug=slug)
    rows = safety_log(study)
    if request.GET.get("format") == "csv":
        response = HttpResponse(safety_csv(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="attune-safety-log-{study.slug}.csv"'
        return response
    context = {"study": study, "rows": rows, "counts": level_counts(rows), "model": safety_model.health()}
    return render(request, "research/study_safety.html", context)
