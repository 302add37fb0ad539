"""The human-baseline page and the rater screens. Views parse and authorise; services do the work."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from research.access.checks import login_required_403, researcher_required, signed_in_user
from research.raters.forms import AnalysisForm, AssignForm, DraftForm, PostForm
from research.raters.human_baseline import (
    HumanBaselineError,
    access_assignment,
    current_step,
    do_assign,
    do_record_analysis,
    do_record_draft,
    do_record_post,
    open_assignments,
    rater_agreement,
)

# ---------------------------------------------------------------------------
# Human baseline
# ---------------------------------------------------------------------------


@researcher_required
def human_baseline(request: HttpRequest) -> HttpResponse:
    form = AssignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            assignment = do_assign(
                form.cleaned_data["conversation"], form.cleaned_data["rater"], signed_in_user(request)
            )
            messages.success(request, f"Assigned {assignment.conversation} to {assignment.rater}.")
            return redirect("research:human")
        except HumanBaselineError as exc:
            form.add_error(None, str(exc))
    assignments = (
        open_assignments()
        .select_related("rater", "conversation", "assigned_by", "run_conversation")
        .annotate(n_turns=Count("conversation__turns"))
    )
    return render(
        request,
        "research/human.html",
        {
            "form": form,
            "assignments": assignments,
            "agreement": rater_agreement(),
        },
    )


@login_required_403
@require_GET
def rater_home(request: HttpRequest) -> HttpResponse:
    assignments = (
        open_assignments()
        .filter(rater=signed_in_user(request))
        .select_related("conversation__topic")
        .annotate(n_turns=Count("conversation__turns"))
    )
    return render(request, "research/rater_home.html", {"assignments": assignments})


@login_required_403
def rater_step(request: HttpRequest, assignment_id: int) -> HttpResponse:
    rater = signed_in_user(request)
    assignment = access_assignment(rater, assignment_id)
    own = assignment.rater_id == rater.pk
    step = current_step(assignment)
    form: DraftForm | AnalysisForm | PostForm | None = None
    if step.stage == "draft":
        form = DraftForm(request.POST or None, initial={"turn_number": step.turn_number})
    elif step.stage == "analysis":
        form = AnalysisForm(request.POST or None, step=step, initial={"turn_number": step.turn_number})
    elif step.stage == "post":
        form = PostForm(request.POST or None)
    if step.stage == "withdrawn":  # nothing shown, nothing saved: the participant withdrew
        return render(
            request,
            "research/rater_step.html",
            {"assignment": assignment, "step": step, "own": own, "progress": 0},
            status=410,
        )
    if request.method == "POST":
        if not own:
            raise Http404("Only the assigned rater can answer.")
        if form is not None and form.is_valid():
            try:
                if isinstance(form, DraftForm):
                    do_record_draft(assignment, form.cleaned_data["turn_number"], form.cleaned_data["draft"])
                elif isinstance(form, AnalysisForm):
                    do_record_analysis(assignment, form.cleaned_data["turn_number"], **form.answers())
                else:
                    do_record_post(assignment, **form.answers())
                return redirect("research:rate", assignment_id=assignment.pk)
            except HumanBaselineError as exc:
                messages.error(request, str(exc))
                return redirect("research:rate", assignment_id=assignment.pk)
    return render(
        request,
        "research/rater_step.html",
        {
            "assignment": assignment,
            "step": step,
            "form": form,
            "own": own,
            "progress": round(
                100 * (assignment.turns_done + (1 if assignment.is_complete else 0)) / (step.total_turns + 1)
            ),
        },
    )
