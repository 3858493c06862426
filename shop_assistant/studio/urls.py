from django.urls import include, path

from . import analytics_views, catalog_views, knowledge, order_views, playground_views, synonym_views, views

app_name = "studio"

# Every page but the index is one store's: its list below is included under "<slug>/" (an included list adds no
# namespace, so every name is still "studio:<name>").
_store = [
    path("", views.store_home, name="store"),
    path("drafts/new", views.new_draft, name="new_draft"),
    path("drafts/<int:version_id>/", views.draft, name="draft"),
    path("versions/<int:version_id>/", views.version_detail, name="version"),
    path("versions/<int:version_id>/nodes.json", views.version_nodes, name="version_nodes"),
    path("versions/<int:version_id>/publish", views.publish, name="publish"),
    path("versions/<int:version_id>/rollback", views.rollback, name="rollback"),
    path("versions/<int:version_id>/discard", views.discard, name="discard"),
    path("questions", views.save_questions, name="questions"),
    path("tokens", views.count_tokens, name="tokens"),
    path("preview", views.preview, name="preview"),
    path("settings", views.store_settings, name="settings"),
    # --- catalog and knowledge (issue 25, items 1 and 2) ---
    path("catalog/", catalog_views.catalog, name="catalog"),
    path("catalog/upload", catalog_views.upload, name="catalog_upload"),
    path("catalog/sources", catalog_views.add_source, name="catalog_add_source"),
    path("catalog/sources/<int:source_id>/sync", catalog_views.sync_source, name="catalog_sync"),
    path("catalog/sources/<int:source_id>/schedule", catalog_views.source_schedule, name="catalog_schedule"),
    path("catalog/sources/<int:source_id>/delete", catalog_views.delete_source, name="catalog_delete"),
    path("catalog/runs/<int:run_id>/", catalog_views.run_progress, name="catalog_run"),
    path("catalog/runs/<int:run_id>/errors.csv", catalog_views.run_errors, name="catalog_run_errors"),
    path("catalog/products/<int:product_id>/", catalog_views.product_preview, name="catalog_product"),
    # --- search synonyms (issue 35, item 4) ---
    path("catalog/synonyms/", synonym_views.synonyms_page, name="synonyms"),
    path("catalog/synonyms/add", synonym_views.add, name="synonyms_add"),
    path("catalog/synonyms/accept", synonym_views.accept, name="synonyms_accept"),
    path("catalog/synonyms/upload", synonym_views.upload, name="synonyms_upload"),
    path("catalog/synonyms.csv", synonym_views.export, name="synonyms_export"),
    path("catalog/synonyms/<int:synonym_id>/delete", synonym_views.delete, name="synonyms_delete"),
    # --- orders (issue 38) ---
    path("orders/", order_views.orders_page, name="orders"),
    path("orders/upload", order_views.upload, name="orders_upload"),
    path("orders/source", order_views.save_source, name="orders_source"),
    path("orders/source/test", order_views.test_source, name="orders_test"),
    path("orders/source/import", order_views.import_source, name="orders_import"),
    path("orders/source/schedule", order_views.source_schedule, name="orders_schedule"),
    path("orders/webhook", order_views.save_webhook, name="orders_webhook"),
    path("orders/webhook/rotate", order_views.rotate_webhook_secret, name="orders_webhook_rotate"),
    path("orders/webhook/remove", order_views.remove_webhook, name="orders_webhook_remove"),
    path("knowledge/", knowledge.knowledge, name="knowledge"),
    path("knowledge/new", knowledge.new_document, name="document_new"),
    path("knowledge/<int:document_id>/", knowledge.document, name="document"),
    path("knowledge/<int:document_id>/questions", knowledge.document_questions, name="document_questions"),
    path("knowledge/<int:document_id>/drafts/new", knowledge.document_new_draft, name="document_new_draft"),
    path("knowledge/<int:document_id>/drafts/<int:version_id>/", knowledge.document_draft, name="document_draft"),
    path("knowledge/<int:document_id>/versions/<int:version_id>/", knowledge.document_version,
         name="document_version"),
    path("knowledge/<int:document_id>/versions/<int:version_id>/publish", knowledge.document_publish,
         name="document_publish"),
    path("knowledge/<int:document_id>/versions/<int:version_id>/rollback", knowledge.document_rollback,
         name="document_rollback"),
    path("knowledge/<int:document_id>/versions/<int:version_id>/rollback/confirm",
         knowledge.document_confirm_rollback, name="document_confirm_rollback"),
    path("knowledge/<int:document_id>/versions/<int:version_id>/discard", knowledge.document_discard,
         name="document_discard"),
    # Insight: analytics, the playground, scores and comparisons of versions.
    path("analytics/", analytics_views.analytics_page, name="analytics"),
    path("analytics/<str:table>.csv", analytics_views.analytics_csv, name="analytics_csv"),
    path("playground/", playground_views.playground, name="playground"),
    path("versions/<int:version_id>/score", playground_views.score, name="score"),
    path("versions/<int:version_id>/score.json", playground_views.score_status, name="score_status"),
    path("compare/", playground_views.compare, name="compare"),
    path("versions/<int:version_id>/rollback/confirm", playground_views.confirm_rollback, name="confirm_rollback"),
]

urlpatterns = [
    path("", views.index, name="index"),
    path("<slug:slug>/", include(_store)),
]
