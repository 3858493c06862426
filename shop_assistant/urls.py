from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("studio/", include("shop_assistant.studio.urls")),
    path("console/", include("shop_assistant.console.urls")),
    path("", include("shop_assistant.ops.urls")),
    path("v1/", include("shop_assistant.api.urls")),
    path("", include("shop_assistant.chat.urls")),
]
