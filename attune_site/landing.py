"""The site's front door: what Attune is, and where participants and researchers go next."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from collection.models import Study


def landing(request: HttpRequest) -> HttpResponse:
    open_studies = Study.objects.open().filter(open_enrolment=True).order_by("title")
    return render(request, "landing.html", {"open_studies": open_studies})
