"""tests/conftest.py: what CI's PostgreSQL pass (`--database-tests`) counts as a database test."""

from __future__ import annotations

import pytest

from tests.conftest import uses_database


def test_a_test_with_the_db_fixture_is_a_database_test(request: pytest.FixtureRequest, db) -> None:
    assert uses_database(request.node)


@pytest.mark.django_db
def test_a_test_with_the_django_db_marker_is_a_database_test(request: pytest.FixtureRequest) -> None:
    assert uses_database(request.node)


@pytest.fixture
def a_row_of_ours(db) -> int:  # as `store` and the other fixtures that need the database
    return 1


def test_a_fixture_that_needs_the_database_makes_a_database_test(request: pytest.FixtureRequest, a_row_of_ours) -> None:
    assert uses_database(request.node)


def test_a_test_that_never_opens_the_database_is_not_one(request: pytest.FixtureRequest, settings) -> None:
    # pytest-django's autouse fixtures (its blocker among them) are in every test's closure: they do not count.
    assert "django_db_blocker" in request.fixturenames
    assert not uses_database(request.node)
