from django.urls import path

from . import views

app_name = "api"

urlpatterns = [
    path("models", views.models_view, name="models"),
    path("chat/completions", views.chat_completions, name="chat-completions"),
    path("completions", views.completions, name="completions"),
]
