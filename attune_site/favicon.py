"""/favicon.ico: the vendored icon from static/, where browsers look for it without being told."""

from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe


@require_safe
@cache_control(public=True, max_age=86400)
def favicon(request: HttpRequest) -> FileResponse:
    found = finders.find("favicon.ico")
    if not found:
        raise Http404("No favicon.")
    return FileResponse(open(found if isinstance(found, str) else found[0], "rb"), content_type="image/x-icon")
