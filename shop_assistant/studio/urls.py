from django.urls import path

from . import analytics_views, playground_views, views

app_name = "studio"

urlpatterns = [
    path("", views.index, name="index"),
    path("<slug:slug>/", views.store_home, name="store"),
    path("<slug:slug>/drafts/new", views.new_draft, name="new_draft"),
    path("<slug:slug>/drafts/<int:version_id>/", views.draft, name="draft"),
    path("<slug:slug>/versions/<int:version_id>/", views.version_detail, name="version"),
    path("<slug:slug>/versions/<int:version_id>/publish", views.publish, name="publish"),
    path("<slug:slug>/versions/<int:version_id>/rollback", views.rollback, name="rollback"),
    path("<slug:slug>/versions/<int:version_id>/discard", views.discard, name="discard"),
    path("<slug:slug>/questions", views.save_questions, name="questions"),
    path("<slug:slug>/tokens", views.count_tokens, name="tokens"),
    path("<slug:slug>/preview", views.preview, name="preview"),
    path("<slug:slug>/settings", views.store_settings, name="settings"),
    # Insight: analytics, the playground, scores and comparisons of versions.
    path("<slug:slug>/analytics/", analytics_views.analytics_page, name="analytics"),
    path("<slug:slug>/analytics/<str:table>.csv", analytics_views.analytics_csv, name="analytics_csv"),
    path("<slug:slug>/playground/", playground_views.playground, name="playground"),
    path("<slug:slug>/versions/<int:version_id>/score", playground_views.score, name="score"),
    path("<slug:slug>/versions/<int:version_id>/score.json", playground_views.score_status, name="score_status"),
    path("<slug:slug>/compare/", playground_views.compare, name="compare"),
    path("<slug:slug>/versions/<int:version_id>/rollback/confirm", playground_views.confirm_rollback,
         name="confirm_rollback"),
]
