"""Prompt versioning through the services: drafts, publish, rollback, and publishes racing each other."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from catalog.models import Store
from shop_assistant.studio import services
from shop_assistant.prompts.models import PromptVersion

from .conftest import make_user

Status = PromptVersion.Status


def statuses(store: Store) -> dict[int, str]:
    return dict(PromptVersion.objects.filter(store=store).values_list("version", "status"))


def test_a_new_store_starts_with_the_default_prompt_published(db, store):
    """However a store is created (here the ORM, as the admin and every command do), it has a published prompt:
    the chat only reads it."""
    default = services.published_prompt(store)
    assert default is not None and (default.version, default.note) == (1, "default")
    assert "Corner Shop" in default.system_prompt and default.published_at is not None
    assert statuses(store) == {1: Status.PUBLISHED}
    # Saving the store again changes nothing.
    store.name = "Corner Shop renamed"
    store.save()
    assert statuses(store) == {1: Status.PUBLISHED}


def test_the_migration_gives_every_store_without_a_published_prompt_the_default(db, store):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("shop_assistant.prompts.migrations.0003_default_prompts")
    bare = Store.objects.create(slug="bare", name="Bare Shop")
    PromptVersion.objects.filter(store=bare).delete()  # as a store made before stores got one on creation
    services.create_draft(bare, "A draft is not a published prompt.")
    kept = services.published_prompt(store)

    migration.publish_default_prompts(apps, None)
    default = services.published_prompt(bare)
    assert statuses(bare) == {1: Status.DRAFT, 2: Status.PUBLISHED} and default.note == "default"
    assert "Bare Shop" in default.system_prompt
    assert services.published_prompt(store) == kept and statuses(store) == {1: Status.PUBLISHED}


def test_drafts_are_numbered_per_store_and_only_drafts_change(db, store, owner):
    other = Store.objects.create(slug="other", name="Other")
    one = services.create_draft(store, "Be nice.", "Returns: 30 days.", user=owner, note="first")
    two = services.create_draft(store, "Be brief.")
    assert (one.version, two.version) == (2, 3)  # v1 is the default every store starts with
    assert services.create_draft(other, "Hello.").version == 2
    assert one.status == Status.DRAFT and one.created_by == owner and one.note == "first"

    services.update_draft(one, "Be very nice.", "", note="softer")
    one.refresh_from_db()
    assert (one.system_prompt, one.policies, one.note) == ("Be very nice.", "", "softer")

    services.publish(one, user=owner)
    with pytest.raises(services.PromptError, match="only drafts"):
        services.update_draft(one, "changed after publishing", "")
    with pytest.raises(services.PromptError, match="empty"):
        services.create_draft(store, "   ")
    with pytest.raises(services.PromptError, match="only drafts"):
        services.discard_draft(one)
    services.discard_draft(two)
    assert statuses(store) == {1: Status.ARCHIVED, 2: Status.PUBLISHED}


def test_publish_archives_the_previous_version_and_records_who_and_when(db, store, owner):
    first = services.publish(services.create_draft(store, "v1"), user=owner)
    assert first.status == Status.PUBLISHED and first.published_at is not None and first.published_by == owner
    second = services.publish(services.create_draft(store, "v2"), user=owner)
    assert statuses(store) == {1: Status.ARCHIVED, 2: Status.ARCHIVED, 3: Status.PUBLISHED}
    assert services.published_prompt(store) == second
    assert second.published_at >= first.published_at
    # Publishing the published version again is a no-op, not an error (double click, two tabs).
    assert services.publish(second).pk == second.pk
    # An archived version is not published directly: that is what rollback is for.
    with pytest.raises(services.PromptError, match="rollback"):
        services.publish(PromptVersion.objects.get(store=store, version=1))


def test_rollback_publishes_an_earlier_text_as_a_new_version(db, store, owner):
    first = services.publish(services.create_draft(store, "original", "policy A"))
    services.publish(services.create_draft(store, "experiment", "policy B"))
    restored = services.rollback(first, user=owner)
    assert restored.version == 4 and restored.status == Status.PUBLISHED
    assert (restored.system_prompt, restored.policies) == ("original", "policy A")
    assert restored.restored_from == first and restored.note == "rollback to v2"
    assert restored.published_by == owner
    assert statuses(store) == {1: Status.ARCHIVED, 2: Status.ARCHIVED, 3: Status.ARCHIVED, 4: Status.PUBLISHED}
    with pytest.raises(services.PromptError, match="already the published"):
        services.rollback(restored)


def test_a_stale_publish_is_refused_without_touching_anything(db, store):
    seen = services.publish(services.create_draft(store, "v1"))
    mine = services.create_draft(store, "mine")
    theirs = services.publish(services.create_draft(store, "theirs"), expected_published=seen.pk)
    with pytest.raises(services.PublishConflict, match="v4 was published"):
        services.publish(mine, expected_published=seen.pk)
    assert services.published_prompt(store) == theirs
    assert PromptVersion.objects.get(pk=mine.pk).status == Status.DRAFT
    # A new store's owner sees its default published: "nothing published" is a stale expectation there.
    fresh = Store.objects.create(slug="fresh", name="Fresh")
    with pytest.raises(services.PublishConflict, match="v1 was published"):
        services.publish(services.create_draft(fresh, "a"), expected_published=None)
    default = services.published_prompt(fresh)
    assert services.publish(services.create_draft(fresh, "b"), expected_published=default.pk).status == Status.PUBLISHED


def test_ensure_default_prompt_is_idempotent(db, store):
    first = services.ensure_default_prompt(store)
    assert first.status == Status.PUBLISHED and "Corner Shop" in first.system_prompt
    assert services.ensure_default_prompt(store) == first
    assert PromptVersion.objects.filter(store=store).count() == 1


def _race(workers: int, work) -> tuple[list, list[BaseException]]:
    """Run ``work(i)`` on ``workers`` threads released together; (results, exceptions)."""
    barrier = threading.Barrier(workers)
    results: list = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            result = work(i)
            with lock:
                results.append(result)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported by the test
            with lock:
                errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    return results, errors


WORKERS = 6


def test_concurrent_publishes_leave_exactly_one_published(transactional_db):
    store = Store.objects.create(slug="race", name="Race")
    base = services.publish(services.create_draft(store, "base"))
    drafts = [services.create_draft(store, f"candidate {i}") for i in range(WORKERS)]

    # Every owner saw `base` published: exactly one publish wins, the others are told someone was quicker.
    results, errors = _race(WORKERS, lambda i: services.publish(drafts[i], expected_published=base.pk))
    assert len(results) == 1, errors
    assert len(errors) == WORKERS - 1 and all(type(e) is services.PublishConflict for e in errors), errors
    winner = results[0]
    assert list(PromptVersion.objects.filter(store=store, status=Status.PUBLISHED)) == [winner]
    assert PromptVersion.objects.get(pk=base.pk).status == Status.ARCHIVED
    assert PromptVersion.objects.filter(store=store, status=Status.DRAFT).count() == WORKERS - 1


def test_concurrent_publishes_without_expectation_all_succeed_one_after_another(transactional_db):
    store = Store.objects.create(slug="race2", name="Race 2")
    drafts = [services.create_draft(store, f"candidate {i}") for i in range(WORKERS)]
    results, errors = _race(WORKERS, lambda i: services.publish(drafts[i]))
    assert errors == [] and len(results) == WORKERS
    published = list(PromptVersion.objects.filter(store=store, status=Status.PUBLISHED))
    assert len(published) == 1
    # The last one to publish is the published one; every other (and the store's default) was archived by the one
    # after it.
    last = max(PromptVersion.objects.filter(store=store), key=lambda v: v.published_at)
    assert published == [last]
    assert PromptVersion.objects.filter(store=store, status=Status.ARCHIVED).count() == WORKERS


def test_concurrent_drafts_rollbacks_and_defaults_never_collide(transactional_db):
    store = Store.objects.create(slug="race3", name="Race 3")
    owner = make_user("racer", store, "owner")
    first = services.publish(services.create_draft(store, "first"))
    services.publish(services.create_draft(store, "second"))

    def work(i: int):
        if i % 3 == 0:
            return services.create_draft(store, f"draft {i}", user=owner)
        if i % 3 == 1:
            return services.rollback(first, user=owner)
        return services.ensure_default_prompt(store)

    results, errors = _race(WORKERS, work)
    assert errors == [], errors
    versions = list(PromptVersion.objects.filter(store=store).values_list("version", flat=True))
    # The default, first and second, then drafts + rollbacks, all numbered apart.
    assert len(versions) == len(set(versions)) == 3 + WORKERS // 3 * 2
    assert PromptVersion.objects.filter(store=store, status=Status.PUBLISHED).count() == 1
