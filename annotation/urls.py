"""Per-turn annotation, included from collection.urls under /s/<token>/turn/<n>/."""

from django.urls import path

from annotation import views

app_name = "annotation"
urlpatterns = [
    path("", views.annotate, name="annotate"),
    path("review/", views.review, name="review"),
]
