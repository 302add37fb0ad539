"""Template context shared by every page."""

from django.http import HttpRequest

from attunebench.catalogue import RESEARCH_ONLY_STATEMENT


def site(request: HttpRequest) -> dict[str, str]:
    return {"research_only_statement": RESEARCH_ONLY_STATEMENT}
