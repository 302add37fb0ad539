from django.contrib import admin
from django.urls import include, path

from attune_site.health import healthz
from attune_site.landing import landing

urlpatterns = [
    path("", landing, name="landing"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("research/", include("research.urls")),
    path("api/", include("research.api_urls")),
    path("", include("collection.urls")),
]
