from django.urls import path

from . import order_views, views

app_name = "console"

urlpatterns = [
    path("", views.inbox_page, name="inbox"),
    path("c/<uuid:pk>/", views.conversation_page, name="conversation"),
    path("c/<uuid:pk>/take", views.take_over, name="take_over"),
    path("c/<uuid:pk>/hand-back", views.hand_back, name="hand_back"),
    path("c/<uuid:pk>/close", views.close, name="close"),
    path("c/<uuid:pk>/reopen", views.reopen, name="reopen"),
    path("c/<uuid:pk>/reply", views.reply, name="reply"),
    path("c/<uuid:pk>/note", views.add_note, name="note"),
    path("c/<uuid:pk>/label", views.label, name="label"),
    path("c/<uuid:pk>/read", views.mark_read, name="read"),
    path("c/<uuid:pk>/assign", views.assign, name="assign"),
    path("notifications/read", views.read_notifications, name="read_notifications"),
    path("labels/", views.labels_page, name="labels"),
    path("identity/", views.identity_page, name="identity"),
    path("labels/<int:pk>/delete", views.delete_label, name="delete_label"),
    path("c/<uuid:pk>/export.<str:fmt>", views.export_conversation, name="export_conversation"),
    path("canned/", views.canned_replies, name="canned"),
    path("canned/<int:pk>/delete", views.delete_canned_reply, name="delete_canned"),
    path("orders/", order_views.queue_page, name="order_requests"),
    path("orders/<int:pk>/decide", order_views.decide, name="decide_order_request"),
    path("exports/", views.start_export, name="start_export"),
    path("exports/<int:pk>/", views.export_progress, name="export_progress"),
    path("exports/<int:pk>/download", views.export_download, name="export_download"),
]
