from django.urls import path

from . import catalog_views, knowledge, views

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
    # --- catalog and knowledge (issue 25, items 1 and 2) ---
    path("<slug:slug>/catalog/", catalog_views.catalog, name="catalog"),
    path("<slug:slug>/catalog/upload", catalog_views.upload, name="catalog_upload"),
    path("<slug:slug>/catalog/sources", catalog_views.add_source, name="catalog_add_source"),
    path("<slug:slug>/catalog/sources/<int:source_id>/sync", catalog_views.sync_source, name="catalog_sync"),
    path("<slug:slug>/catalog/sources/<int:source_id>/schedule", catalog_views.source_schedule,
         name="catalog_schedule"),
    path("<slug:slug>/catalog/sources/<int:source_id>/delete", catalog_views.delete_source, name="catalog_delete"),
    path("<slug:slug>/catalog/runs/<int:run_id>/", catalog_views.run_progress, name="catalog_run"),
    path("<slug:slug>/catalog/runs/<int:run_id>/errors.csv", catalog_views.run_errors, name="catalog_run_errors"),
    path("<slug:slug>/catalog/products/<int:product_id>/", catalog_views.product_preview, name="catalog_product"),
    path("<slug:slug>/knowledge/", knowledge.knowledge, name="knowledge"),
    path("<slug:slug>/knowledge/new", knowledge.new_document, name="document_new"),
    path("<slug:slug>/knowledge/<int:document_id>/", knowledge.document, name="document"),
    path("<slug:slug>/knowledge/<int:document_id>/questions", knowledge.document_questions, name="document_questions"),
    path("<slug:slug>/knowledge/<int:document_id>/drafts/new", knowledge.document_new_draft, name="document_new_draft"),
    path("<slug:slug>/knowledge/<int:document_id>/drafts/<int:version_id>/", knowledge.document_draft,
         name="document_draft"),
    path("<slug:slug>/knowledge/<int:document_id>/versions/<int:version_id>/", knowledge.document_version,
         name="document_version"),
    path("<slug:slug>/knowledge/<int:document_id>/versions/<int:version_id>/publish", knowledge.document_publish,
         name="document_publish"),
    path("<slug:slug>/knowledge/<int:document_id>/versions/<int:version_id>/rollback", knowledge.document_rollback,
         name="document_rollback"),
    path("<slug:slug>/knowledge/<int:document_id>/versions/<int:version_id>/discard", knowledge.document_discard,
         name="document_discard"),
]
