from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic.base import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links (every page links the static file). Lazy: the
    # static URL (hashed under a manifest storage) is read when asked, not when the URLs are imported.
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("favicon.ico"), permanent=True)),
    path("accounts/", include("django.contrib.auth.urls")),
    path("studio/", include("shop_assistant.studio.urls")),
    path("console/", include("shop_assistant.console.urls")),
    path("", include("shop_assistant.ops.urls")),
    path("v1/", include("shop_assistant.api.urls")),
    path("", include("shop_assistant.chat.urls")),
]
