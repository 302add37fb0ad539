from django.urls import path

app_name = "research"
urlpatterns: list = []
