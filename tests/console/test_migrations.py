"""console's data migration 0004: the store's retention moves off catalog.Store into RetentionSettings, and back
when reversed."""

from __future__ import annotations

import pytest

from tests.chat.test_migrations import migrate

BEFORE = ("console", "0003_label_color_notifications")  # catalog 0008, which removes the old column, goes with it


@pytest.mark.django_db(transaction=True)  # the migration executor runs outside the test's transaction
def test_0004_moves_the_retention_off_the_store_and_back():
    try:
        check_0004()
    finally:
        migrate(None)  # the next tests run on the latest schema whatever happened


def check_0004() -> None:
    Store = migrate(BEFORE).get_model("catalog", "Store")
    kept_a_month = Store.objects.create(slug="month", name="Month", retention_days=30).pk
    kept_forever = Store.objects.create(slug="forever", name="Forever").pk

    apps = migrate(None)
    RetentionSettings = apps.get_model("console", "RetentionSettings")
    # Only what differs from the default (keep everything) needs a row.
    assert dict(RetentionSettings.objects.values_list("store_id", "retention_days")) == {kept_a_month: 30}
    assert "retention_days" not in {field.name for field in apps.get_model("catalog", "Store")._meta.concrete_fields}
    RetentionSettings.objects.create(store_id=kept_forever, retention_days=7)  # set after the move

    Store = migrate(BEFORE).get_model("catalog", "Store")
    assert dict(Store.objects.values_list("pk", "retention_days")) == {kept_a_month: 30, kept_forever: 7}
