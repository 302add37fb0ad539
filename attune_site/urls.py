from django.contrib import admin
from django.urls import include, path

from attune_site.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("research/", include("research.urls")),
    path("api/", include("research.api_urls")),
    path("", include("collection.urls")),
]
