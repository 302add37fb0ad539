"""Participant-facing URLs, mounted at the site root. Everything hangs off the secret study-link token."""

from django.urls import include, path

from collection import views

app_name = "collection"
urlpatterns = [
    path("join/<slug:slug>/", views.join, name="join"),
    path("s/<str:token>/", views.resume, name="resume"),
    path("s/<str:token>/consent/", views.consent, name="consent"),
    path("s/<str:token>/about-you/", views.profile, name="profile"),
    path("s/<str:token>/feelings-before/", views.pre_panas, name="pre_panas"),
    path("s/<str:token>/topic/", views.topic, name="topic"),
    path("s/<str:token>/chat/", views.chat, name="chat"),
    path("s/<str:token>/chat/send/", views.chat_send, name="chat_send"),
    path("s/<str:token>/chat/reply/<int:turn_number>/", views.chat_reply, name="chat_reply"),
    path("s/<str:token>/chat/finish/", views.chat_finish, name="chat_finish"),
    path("s/<str:token>/feelings-after/", views.post_panas, name="post_panas"),
    path("s/<str:token>/your-view/", views.survey, name="survey"),
    path("s/<str:token>/thank-you/", views.done, name="done"),
    path("s/<str:token>/withdraw/", views.withdraw, name="withdraw"),
    path("s/<str:token>/support/<int:event_id>/", views.safety_choice, name="safety_choice"),
    path("s/<str:token>/a-break/", views.taking_a_break, name="taking_a_break"),
    path("s/<str:token>/stopped/", views.stopped, name="stopped"),
    path("s/<str:token>/turn/<int:turn_number>/", include("annotation.urls")),
    # Recruitment-platform entry and exit
    path("enter/<slug:slug>/", views.enter, name="enter"),
    path("s/<str:token>/not-taking-part/", views.not_taking_part, name="not_taking_part"),
    path("s/<str:token>/return/", views.platform_return, name="platform_return"),
]
