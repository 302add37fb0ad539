from django.urls import path

app_name = "collection"
urlpatterns: list = []
