"""Console pages and actions under every role rule; the inbox's sections, filters and search."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import urllib.parse

import pytest
from django.utils import timezone

from shop_assistant.chat.models import Conversation
from shop_assistant.console.models import Action, CannedReply, Label, Note, TranscriptExport

from .conftest import ALLOWED, ROLES, add_message, http_client, make_conversation

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", ROLES)
def test_every_console_page_follows_the_role_rules(world, role):
    conversation = make_conversation(world.store_a)
    add_message(conversation, "user", "Where is my parcel?")
    other = make_conversation(world.store_b)
    add_message(other, "user", "Beta question")
    client = http_client(world.users[role])
    base = f"/console/c/{conversation.pk}/"

    inbox = client.get("/console/")
    page = client.get(base)
    export = client.get(base + "export.json")
    note = client.post(base + "note", {"text": "VIP customer"})
    take = client.post(base + "take")

    if role == "anonymous":
        # Pages send a logged-out visitor to the login page, which comes back to them; actions stay 403.
        for response, path in ((inbox, "/console/"), (page, base), (export, base + "export.json")):
            assert response.status_code == 302, path
            assert response["Location"] == "/accounts/login/?next=" + urllib.parse.quote(path), response["Location"]
        assert {note.status_code, take.status_code} == {403}
        assert client.get("/console/exports/1/").status_code == 302
        assert client.post("/console/exports/", {"format": "csv"}).status_code == 403
    elif role == "plain":  # logged in, but works for no store: the 403 page says so
        assert {inbox.status_code, page.status_code, export.status_code, note.status_code, take.status_code} == {403}
        assert client.get("/console/exports/1/").status_code == 403
        assert client.post("/console/exports/", {"format": "csv"}).status_code == 403
        assert b"does not work for this store" in inbox.content
    elif role == "other_agent":
        assert inbox.status_code == 200
        assert str(conversation.pk) not in inbox.content.decode() and str(other.pk) in inbox.content.decode()
        assert {page.status_code, export.status_code, note.status_code, take.status_code} == {403}
        assert client.post("/console/exports/", {"store": world.store_a.pk}).status_code == 403
    else:
        assert role in ALLOWED
        assert inbox.status_code == 200 and str(conversation.pk) in inbox.content.decode()
        assert (str(other.pk) in inbox.content.decode()) == (role == "superuser")
        assert page.status_code == 200 and b"Where is my parcel?" in page.content
        assert json.loads(export.content)["conversations"][0]["messages"][0]["text"] == "Where is my parcel?"
        assert note.status_code == 200 and Note.objects.get(conversation=conversation).text == "VIP customer"
        assert take.status_code == 200 and json.loads(take.content)["status"] == "agent"
    # Nothing was done by those who may not.
    if role not in ALLOWED:
        conversation.refresh_from_db()
        assert conversation.status == "bot" and not Note.objects.exists() and not Action.objects.exists()


def test_take_over_reply_hand_back_close_are_logged_with_who_and_when(transactional_db, world):
    # transactional: the reply goes through channels' database_sync_to_async, which closes the connection
    agent, owner = world.users["agent"], world.users["owner"]
    conversation = make_conversation(world.store_a)
    base = f"/console/c/{conversation.pk}/"
    dana, olivia = http_client(agent), http_client(owner)

    assert dana.post(base + "reply", {"text": "hi"}).status_code == 409  # not taken yet
    assert dana.post(base + "take").json() == {"ok": True, "status": "agent", "assigned_to": "Dana"}
    conflict = olivia.post(base + "take")
    assert conflict.status_code == 409 and "Dana" in conflict.json()["error"]
    assert olivia.post(base + "reply", {"text": "me too"}).status_code == 409
    assert dana.post(base + "reply", {"text": "Hi, Dana here."}).json()["ok"]
    assert list(conversation.messages.values_list("role", "agent", "text")) == [("agent", "Dana", "Hi, Dana here.")]
    assert dana.post(base + "hand-back").json()["status"] == "bot"
    assert olivia.post(base + "close").json()["status"] == "closed"
    assert olivia.post(base + "reopen").json()["status"] == "bot"

    log = list(Action.objects.filter(conversation=conversation).values_list("user__username", "kind"))
    assert log == [("dana", "take_over"), ("dana", "reply"), ("dana", "hand_back"), ("olivia", "close"),
                   ("olivia", "reopen")]
    assert all(abs(a.created_at - timezone.now()) < dt.timedelta(minutes=1) for a in Action.objects.all())
    page = dana.get(base).content.decode()
    assert "Take over" in page and "Olivia · Close" in page  # the activity list shows who did what


def test_labels_canned_replies_and_escaped_output(world):
    conversation = make_conversation(world.store_a)
    add_message(conversation, "user", '<script>alert("x")</script>')
    CannedReply.objects.create(store=world.store_a, shortcut="returns", text="Returns are free for 30 days.")
    Label.objects.create(store=world.store_a, name="refund", color="#cf222e")
    client = http_client(world.users["agent"])
    base = f"/console/c/{conversation.pk}/"
    # Labels are the store's presets: a free-text one is refused with a message that says where to add it.
    refused = client.post(base + "label", {"name": "refunds please"})
    assert refused.status_code == 409 and "Labels page" in refused.json()["error"]
    assert Label.objects.count() == 1
    assert client.post(base + "label", {"name": "refund"}).json()["ok"]
    assert list(conversation.labels.values_list("name", flat=True)) == ["refund"]
    page = client.get(base).content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "Returns are free for 30 days." in page and '"shortcut": "returns"' in page  # the "/" picker's data
    assert 'data-color="#cf222e"' in page
    assert client.post(base + "label", {"name": "refund", "on": "0"}).json()["ok"]
    assert not conversation.labels.exists() and Label.objects.filter(store=world.store_a, name="refund").exists()


def test_inbox_sections_waiting_longest_first_with_wait_and_unread(world):
    now = timezone.now()
    agent = world.users["agent"]
    newer = make_conversation(world.store_a, "handoff", handoff_requested_at=now - dt.timedelta(minutes=2))
    older = make_conversation(world.store_a, "handoff", handoff_requested_at=now - dt.timedelta(minutes=9))
    mine = make_conversation(world.store_a, "agent", assigned_to=agent)
    chatting = make_conversation(world.store_a)
    add_message(chatting, "user", "one")
    add_message(chatting, "user", "two")

    from shop_assistant.console import inbox

    sections = inbox.sections(agent)
    assert [i.conversation.pk for i in sections.waiting] == [older.pk, newer.pk]
    assert sections.waiting[0].wait.startswith("9 min")
    assert [i.conversation.pk for i in sections.mine] == [mine.pk]
    assert chatting.pk in [i.conversation.pk for i in sections.live]
    assert {i.conversation.pk: i.unread for i in sections.live}[chatting.pk] == 2

    client = http_client(agent)
    client.get(f"/console/c/{chatting.pk}/")  # reading it clears the count
    assert {i.conversation.pk: i.unread for i in inbox.sections(agent).live}[chatting.pk] == 0
    add_message(chatting, "user", "three")
    assert {i.conversation.pk: i.unread for i in inbox.sections(agent).live}[chatting.pk] == 1

    html = client.get("/console/?partial=1").content.decode()
    assert html.index(str(older.pk)) < html.index(str(newer.pk)) and "waiting 9 min" in html


def test_inbox_filters_and_search(world):
    a = make_conversation(world.store_a, "closed")
    add_message(a, "user", "My waterproof boots leak")
    b = make_conversation(world.store_a)
    add_message(b, "user", "Do you ship to Norway?")
    Conversation.objects.filter(pk=b.pk).update(created_at=timezone.now() - dt.timedelta(days=40),
                                                last_activity_at=timezone.now() - dt.timedelta(days=40))
    client = http_client(world.users["superuser"])

    def listed(query: str) -> set[str]:
        html = client.get("/console/?partial=1&" + query).content.decode()
        return {str(c.pk) for c in (a, b) if str(c.pk) in html}

    assert listed("") == {str(a.pk), str(b.pk)}
    assert listed("q=boots") == {str(a.pk)}
    assert listed("q=norway") == {str(b.pk)}
    assert listed("status=closed") == {str(a.pk)}
    assert listed(f"store={world.store_b.pk}") == set()
    since = (timezone.now() - dt.timedelta(days=1)).date().isoformat()
    assert listed(f"from={since}") == {str(a.pk)}
    until = (timezone.now() - dt.timedelta(days=30)).date().isoformat()
    assert listed(f"to={until}") == {str(b.pk)}
    assert listed("from=not-a-date") == {str(a.pk), str(b.pk)}


def test_range_export_runs_as_a_task_with_progress_and_only_allowed_stores(world):
    for i in range(3):
        add_message(make_conversation(world.store_a), "user", f"=cmd|' /C calc'!A{i}")
    add_message(make_conversation(world.store_b), "user", "beta secret")
    client = http_client(world.users["agent"])
    started = client.post("/console/exports/", {"format": "csv"}).json()
    progress = client.get(started["progress_url"]).json()  # eager Celery: already done
    assert progress["status"] == "done" and progress["done"] == progress["total"] == 3 and progress["progress"] == 1
    body = client.get(progress["download_url"]).content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == 3 and all(r["text"].startswith("'=") for r in rows)  # no spreadsheet formulas
    assert "beta secret" not in body
    # Someone else's export is not yours to read.
    other = http_client(world.users["owner"])
    assert other.get(started["progress_url"]).status_code == 404
    assert TranscriptExport.objects.get().user == world.users["agent"]


@pytest.mark.parametrize("role", ROLES)
def test_canned_replies_the_stores_agents_and_owners_add_edit_and_delete(world, role):
    client = http_client(world.users[role])
    added = client.post("/console/canned/", {"store": world.store_a.pk, "shortcut": "hours", "text": "9 to 5."})
    page = client.get("/console/canned/")
    if role in ALLOWED:
        assert added.status_code == 302 and CannedReply.objects.get(shortcut="hours").store == world.store_a
        assert b"9 to 5." in page.content
        duplicate = client.post("/console/canned/", {"store": world.store_a.pk, "shortcut": "hours", "text": "x"})
        assert duplicate.status_code == 400 and CannedReply.objects.count() == 1
        reply = CannedReply.objects.get()
        edited = client.post("/console/canned/", {"pk": reply.pk, "shortcut": "hours", "text": "9 to 6, {name}."})
        assert edited.status_code == 302 and CannedReply.objects.get().text == "9 to 6, {name}."
        assert client.post(f"/console/canned/{reply.pk}/delete").status_code == 302
        assert not CannedReply.objects.exists()
        return
    assert added.status_code == 403 and not CannedReply.objects.exists()
    reply = CannedReply.objects.create(store=world.store_a, shortcut="hi", text="Hello from us")
    page = client.get("/console/canned/")
    assert client.post(f"/console/canned/{reply.pk}/delete").status_code == 403 and CannedReply.objects.exists()
    edit = client.post("/console/canned/", {"pk": reply.pk, "shortcut": "hi", "text": "Changed"})
    assert edit.status_code == 403 and CannedReply.objects.get().text == "Hello from us"
    if role == "other_agent":
        assert page.status_code == 200 and b"Hello from us" not in page.content
    else:
        assert page.status_code == (302 if role == "anonymous" else 403)


def test_staff_log_in_with_the_login_form_and_land_in_the_console(world):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/?next=/console/")
    assert page.status_code == 200
    token = page.cookies["csrftoken"].value
    wrong = client.post("/accounts/login/", {"username": "dana", "password": "nope", "csrfmiddlewaretoken": token})
    assert wrong.status_code == 200 and b"didn't match" in wrong.content
    done = client.post("/accounts/login/", {"username": "dana", "password": "pw", "csrfmiddlewaretoken": token,
                                            "next": "/console/"})
    assert done.status_code == 302 and done["Location"] == "/console/"
    assert client.get("/console/").status_code == 200
    # Console POSTs need the CSRF token too.
    c = make_conversation(world.store_a)
    assert client.post(f"/console/c/{c.pk}/take").status_code == 403
    ok = client.post(f"/console/c/{c.pk}/take", HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert ok.status_code == 200


@pytest.mark.parametrize("query", ["store=99999999999999999999999", "store=%C2%B2", "from=2026-13-45", "to=2026-02-30"])
def test_an_unreadable_filter_is_a_400_with_the_inbox_not_a_500(world, query):
    conversation = make_conversation(world.store_a)
    add_message(conversation, "user", "Where is my parcel?")
    response = http_client(world.users["agent"]).get("/console/?" + query)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Left out of the filter" in page and str(conversation.pk) in page  # the inbox, without that filter


@pytest.mark.parametrize("data", [{"from": "2026-13-45"}, {"to": "not-a-date"}, {"store": "99999999999999999999999"},
                                  {"store": "abc"}])
def test_an_export_with_an_unreadable_range_or_store_is_a_400(world, data):
    response = http_client(world.users["agent"]).post("/console/exports/", {"format": "csv", **data})
    assert response.status_code == 400 and response.json()["ok"] is False and response.json()["error"]
    assert not TranscriptExport.objects.exists()


def test_a_canned_reply_for_an_impossible_store_id_is_refused(world):
    client = http_client(world.users["owner"])
    response = client.post("/console/canned/", {"store": "99999999999999999999999", "shortcut": "x", "text": "y"})
    assert response.status_code == 403 and not CannedReply.objects.exists()


def test_an_answer_in_progress_is_not_shown_as_a_blank_message(world):
    """The pending row an answer starts with (for a node's failover) is no message: the conversation page, its
    export and the inbox preview show what was said."""
    conversation = make_conversation(world.store_a)
    add_message(conversation, "user", "Do you ship to Norway?")
    pending = add_message(conversation, "assistant", "")  # no finish reason: in progress
    client = http_client(world.users["agent"])
    base = f"/console/c/{conversation.pk}/"
    exported = json.loads(client.get(base + "export.json").content)["conversations"][0]["messages"]
    assert [(m["role"], m["text"]) for m in exported] == [("user", "Do you ship to Norway?")]
    assert client.get(base).context["messages"].count() == 1
    assert "Do you ship to Norway?" in client.get("/console/").content.decode()

    pending.text, pending.finish_reason = "We ship across Europe.", "stop"
    pending.save()
    exported = json.loads(client.get(base + "export.json").content)["conversations"][0]["messages"]
    assert [m["role"] for m in exported] == ["user", "assistant"]
