from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("shop_assistant.ops.urls")),
    path("v1/", include("shop_assistant.api.urls")),
    path("", include("shop_assistant.chat.urls")),
]
