"""The analytics page and its CSV exports over the seeded week: the figures shown, the exports' rows, the
escaping of shoppers' words, and who may see it."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client

from catalog.models import Store
from shop_assistant.chat.models import Conversation, Message

from .conftest import make_user
from .seed import at, seed_week

pytestmark = pytest.mark.django_db
WEEK = "start=2026-11-02&end=2026-11-08"


@pytest.fixture
def week(store):
    return seed_week(store)


@pytest.fixture
def client(owner):
    client = Client()
    client.force_login(owner)
    return client


def kpi(page: str, name: str) -> str:
    match = re.search(rf'data-kpi="{name}"><span class="kpi-value">([^<]*)</span><span class="kpi-label">([^<]*)', page)
    assert match, name
    return f"{match.group(1)} | {match.group(2)}"


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_the_page_shows_every_figure_of_the_week(week, client):
    response = client.get(f"/studio/corner/analytics/?{WEEK}")
    assert response.status_code == 200
    page = response.content.decode()
    assert kpi(page, "conversations") == "7 | conversations"
    assert kpi(page, "messages") == "22 | messages"
    assert kpi(page, "deflection") == "57.1% | answered without a person (4)"
    assert kpi(page, "handoffs") == "3 | handoffs · median first human reply 360 s"
    assert kpi(page, "csat") == "3.50 | CSAT average of 4"
    assert kpi(page, "thumbs") == "1 / 1 | thumbs up / down"
    assert kpi(page, "cards") == "2 / 3 | card clicks / cards shown (66.7%)"
    assert kpi(page, "cache") == "37.5% | prompt tokens from the prefix cache"
    assert '<strong data-figure="first-token">500 ms</strong> over 3 answers' in page
    # Charts are inline SVG drawn on the server: one bar per day and series, each with its value as a tooltip.
    assert page.count("<svg") == 2
    assert "Mon 02 · Conversations: 2</title>" in page and "Thu 05 · Handoffs: 2</title>" in page
    assert "4★ · Ratings: 1</title>" in page
    # The no-match questions link to the conversations in the console.
    c = week.conversations
    kayak_row = page[page.index("Do you have a kayak?"):]
    kayak_row = kayak_row[: kayak_row.index("</tr>")]
    assert "<td>3</td>" in kayak_row
    assert f'href="/console/c/{c["kayak-again"].pk}/"' in kayak_row and f'href="/console/c/{c["kayaks"].pk}/"' in kayak_row
    summary = dict(re.findall(r'<tr><th scope="row">([^<]+)</th><td>([^<]*)</td></tr>', page))
    assert summary["Handoffs with a human reply"] == "2" and summary["CSAT satisfied (4-5)"] == "50.0%"
    assert summary["Card click-through"] == "66.7%" and summary["No-match replies"] == "4"


def test_the_order_requests_by_outcome_on_the_page(week, client):
    """The requests' key figure reads the report's count by outcome; a request of a conversation started after
    the range does not count."""
    from django.utils import timezone

    from shop_assistant.orders.models import Order, OrderRequest

    order = Order.objects.create(store=week.store, number="1001", email="sam@example.com", placed_at=timezone.now())
    c = week.conversations
    for conversation, status in ((c["order"], "accepted"), (c["order"], "declined"), (c["person"], "declined"),
                                 (c["waiting"], "pending"), (c["next-week"], "accepted")):
        OrderRequest.objects.create(store=week.store, order=order, conversation=conversation, kind="return",
                                    status=status)
    page = client.get(f"/studio/corner/analytics/?{WEEK}").content.decode()
    assert kpi(page, "order-requests") == "1 / 2 | order requests accepted / declined (1 pending)"
    summary = dict(re.findall(r'<tr><th scope="row">([^<]+)</th><td>([^<]*)</td></tr>', page))
    assert (summary["Order requests accepted"], summary["Order requests pending"]) == ("1", "1")


def test_csv_exports_hold_the_same_rows(week, client):
    summary = read_csv(client.get(f"/studio/corner/analytics/summary.csv?{WEEK}"))
    assert summary[0] == ["Figure", "Value"]
    figures = dict(summary[1:])
    assert figures["Conversations"] == "7" and figures["Deflection rate"] == "57.1%"
    assert figures["Median time to first human reply (s)"] == "360" and figures["CSAT average (1-5)"] == "3.50"
    assert figures["Prefix-cache share"] == "37.5%" and figures["Thumbs down"] == "1"
    assert figures["Median first-token time (ms)"] == "500"
    daily = read_csv(client.get(f"/studio/corner/analytics/daily.csv?{WEEK}"))
    assert daily[0] == ["Day", "Conversations", "Answered without a person", "Handoffs"]
    assert daily[1:] == [["2026-11-02", "2", "2", "0"], ["2026-11-03", "2", "1", "1"], ["2026-11-04", "0", "0", "0"],
                         ["2026-11-05", "2", "0", "2"], ["2026-11-06", "0", "0", "0"], ["2026-11-07", "0", "0", "0"],
                         ["2026-11-08", "1", "1", "0"]]  # fmt: skip
    assert read_csv(client.get(f"/studio/corner/analytics/csat.csv?{WEEK}"))[1:] == [
        ["1", "0"], ["2", "1"], ["3", "1"], ["4", "1"], ["5", "1"]
    ]
    c = week.conversations
    no_match = read_csv(client.get(f"/studio/corner/analytics/no_match.csv?{WEEK}"))
    assert no_match[1:] == [["Do you have a kayak?", "3", f'{c["kayak-again"].pk} {c["kayaks"].pk}'],
                            ["Do you sell laptops?", "1", str(c["laptops"].pk)]]  # fmt: skip
    assert client.get(f"/studio/corner/analytics/nope.csv?{WEEK}").status_code == 400


def test_shoppers_words_are_escaped_on_the_page_and_defused_in_csv(store, client):
    conversation = Conversation.objects.create(store=store, resume_token_hash="x" * 64)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=at(2))
    Message.objects.create(conversation=conversation, role="user", text="=HYPERLINK(\"x\") <img src=x onerror=alert(1)>",
                           created_at=at(2, seconds=1))
    Message.objects.create(conversation=conversation, role="assistant", finish_reason="fixed",
                           text="Sorry, I couldn't find that in our catalog.", created_at=at(2, seconds=2), kind="no_match")
    page = client.get(f"/studio/corner/analytics/?{WEEK}").content.decode()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    rows = read_csv(client.get(f"/studio/corner/analytics/no_match.csv?{WEEK}"))
    assert rows[1][0].startswith("'=HYPERLINK")


def test_the_owner_sees_what_was_not_understood_apart_from_what_the_store_does_not_sell(store, client):
    """Issue 40, item 7: a Spanish question the assistant could not read is listed under its own heading and
    export, not under "Don't sell"; a Spanish no-match reply is under "Don't sell"."""
    for day, question, reply, kind in (
        (2, "¿Tienen chaquetas impermeables?", "Lo siento, no he entendido tu mensaje.", "not_understood"),
        (3, "¿Venden bicicletas de montaña?", "Lo siento, no he encontrado eso en nuestro catálogo.", "no_match"),
    ):
        conversation = Conversation.objects.create(store=store, resume_token_hash=str(day) * 64)
        Conversation.objects.filter(pk=conversation.pk).update(created_at=at(day))
        Message.objects.create(conversation=conversation, role="user", text=question, created_at=at(day, seconds=1))
        Message.objects.create(conversation=conversation, role="assistant", finish_reason="fixed", text=reply,
                               created_at=at(day, seconds=2), kind=kind)
    page = client.get(f"/studio/corner/analytics/?{WEEK}").content.decode()
    dont_sell, not_understood = page.split('id="no-match"')[1].split('id="not-understood"')
    assert "¿Venden bicicletas de montaña?" in dont_sell and "chaquetas" not in dont_sell
    assert "¿Tienen chaquetas impermeables?" in not_understood.split("</section>")[0]
    assert "bicicletas" not in not_understood
    rows = read_csv(client.get(f"/studio/corner/analytics/not_understood.csv?{WEEK}"))
    assert [row[:2] for row in rows] == [["Question", "Times asked"], ["¿Tienen chaquetas impermeables?", "1"]]


def test_the_page_never_writes(week, client):
    before = (Conversation.objects.count(), Message.objects.count(), list(Conversation.objects.values_list("pk", "status")))
    client.get(f"/studio/corner/analytics/?{WEEK}")
    client.get(f"/studio/corner/analytics/summary.csv?{WEEK}")
    assert client.post(f"/studio/corner/analytics/?{WEEK}").status_code == 405
    after = (Conversation.objects.count(), Message.objects.count(), list(Conversation.objects.values_list("pk", "status")))
    assert before == after


@pytest.mark.parametrize("url", ["/studio/corner/analytics/", "/studio/corner/analytics/summary.csv"])
def test_only_the_owner_sees_analytics(store, week, url):
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and anonymous["Location"] == f"/accounts/login/?next={url}"
    for user in (make_user("adam", store, "agent"),
                 make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"),
                 make_user("sam")):  # fmt: skip
        client = Client()
        client.force_login(user)
        assert client.get(url).status_code == 403, user


def test_empty_cells_stay_empty_in_the_csv(store, client):
    """Before: every empty cell was written as a lone "'" (issue 39, item 12): with no conversations, the
    figures that have no value (a median of nothing) are empty cells."""
    summary = read_csv(client.get(f"/studio/corner/analytics/summary.csv?{WEEK}"))
    figures = dict(summary[1:])
    assert figures["Median time to first human reply (s)"] == "" and figures["Conversations"] == "0"
    assert "'" not in figures.values()
