from django.contrib import admin
from django.urls import include, path

from attune_site.favicon import favicon
from attune_site.health import healthz
from attune_site.landing import landing
from attune_site.metrics import metrics

urlpatterns = [
    path("", landing, name="landing"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("research/", include("research.urls")),
    path("api/", include("research.api.urls")),
    path("", include("collection.urls")),
]

# Calm, phone-sized error pages with the study header and crisis resources (attune_site.errors).
handler400 = "attune_site.errors.bad_request"
handler403 = "attune_site.errors.permission_denied"
handler404 = "attune_site.errors.page_not_found"
handler500 = "attune_site.errors.server_error"
