"""The studio's pages and actions: owners only (403 for agents, other stores' owners and anonymous users, on
every page and action), CSRF on every form, and what an owner does there."""

from __future__ import annotations

import json

import pytest
from django.test import AsyncClient, Client

from catalog.models import Store
from shop_assistant.chat.models import AnswerSettings, WidgetSettings
from shop_assistant.studio import services
from shop_assistant.prompts.models import PromptVersion, SampleQuestion
from shop_assistant.studio.prewarm import system_prefix_ids

from .conftest import make_user

Status = PromptVersion.Status


@pytest.fixture
def versions(store):
    archived = services.publish(services.create_draft(store, "Old prompt."))
    published = services.publish(services.create_draft(store, "Current prompt.\nBe brief."))
    draft = services.create_draft(store, "Current prompt.\nBe brief and kind.")
    return archived, published, draft


def every_page_and_action(versions) -> list[tuple[str, str, dict]]:
    archived, published, draft = versions
    base = "/studio/corner"
    return [
        ("get", "/studio/", {}),
        ("get", f"{base}/", {}),
        ("get", f"{base}/drafts/{draft.pk}/", {}),
        ("get", f"{base}/versions/{archived.pk}/", {}),
        ("get", f"{base}/versions/{published.pk}/nodes.json", {}),
        ("get", f"{base}/settings", {}),
        ("post", f"{base}/drafts/new", {}),
        ("post", f"{base}/drafts/{draft.pk}/", {"system_prompt": "hacked", "policies": "", "note": "", "publish": "1"}),
        ("post", f"{base}/versions/{draft.pk}/publish", {}),
        ("post", f"{base}/versions/{archived.pk}/rollback", {}),
        ("post", f"{base}/versions/{draft.pk}/discard", {}),
        ("post", f"{base}/questions", {"questions": "hacked?"}),
        ("post", f"{base}/tokens", {"system_prompt": "x"}),
        ("post", f"{base}/preview", {"version": str(draft.pk), "question": "hi"}),
        ("post", f"{base}/settings", {"name": "Hacked", "currency": "EUR"}),
    ]


def snapshot(store: Store):
    store.refresh_from_db()
    return (
        list(PromptVersion.objects.filter(store=store).order_by("pk").values_list("pk", "status", "system_prompt")),
        store.name,
        list(SampleQuestion.objects.filter(store=store).values_list("text", flat=True)),
    )


@pytest.mark.parametrize("who", ["anonymous", "agent", "owner_of_another_store", "staff_without_store"])
def test_everyone_but_the_owner_gets_403_on_every_page_and_action(store, versions, who):
    client = Client()
    if who == "agent":
        client.force_login(make_user("adam", store, "agent"))
    elif who == "owner_of_another_store":
        client.force_login(make_user("oscar", Store.objects.create(slug="other", name="Other"), "owner"))
    elif who == "staff_without_store":
        client.force_login(make_user("sam", None, None))
    before = snapshot(store)
    for method, url, data in every_page_and_action(versions):
        if who == "owner_of_another_store" and url == "/studio/":
            continue  # their own studio index (redirects to their store)
        response = getattr(client, method)(url, data)
        if who == "anonymous" and method == "get":  # a logged-out visitor is sent to log in, then back here
            assert response.status_code == 302, (who, method, url, response.status_code)
            assert response["Location"] == f"/accounts/login/?next={url}"
            continue
        assert response.status_code == 403, (who, method, url, response.status_code)
    assert snapshot(store) == before


def test_the_owner_reaches_every_page_and_action(store, versions, owner):
    client = Client()
    client.force_login(owner)
    for method, url, data in every_page_and_action(versions):
        if url.endswith("/preview"):
            continue  # streams from the engine: see test_preview_streams_draft_and_published_under_their_salts
        response = getattr(client, method)(url, data)
        assert response.status_code in (200, 302), (method, url, response.status_code)


def test_logged_out_the_studio_sends_you_to_log_in_and_back(store, versions, owner):
    client = Client()
    response = client.get("/studio/corner/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/studio/corner/"
    logged_in = client.post("/accounts/login/", {"username": "olivia", "password": "studio-test-password",
                                                 "next": "/studio/corner/"})
    assert logged_in["Location"] == "/studio/corner/" and client.get("/studio/corner/").status_code == 200


def test_an_action_posted_logged_out_is_a_403_that_offers_the_login(store, versions):
    response = Client().post("/studio/corner/questions", {"questions": "hi?"})
    assert response.status_code == 403
    assert b"/accounts/login/?next=/studio/corner/questions" in response.content


def test_forms_need_the_csrf_token(store, versions, owner):
    _, published, draft = versions
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(f"/studio/corner/versions/{draft.pk}/publish").status_code == 403
    assert client.post("/studio/corner/settings", {"name": "No token", "currency": "USD"}).status_code == 403
    assert services.published_prompt(store) == published
    page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 2  # the draft form and the discard form


def test_login_page_and_redirect_into_the_studio(store, owner):
    client = Client()
    page = client.get("/accounts/login/?next=/studio/")
    assert page.status_code == 200 and b'name="username"' in page.content
    response = client.post("/accounts/login/", {"username": "olivia", "password": "studio-test-password", "next": "/studio/"})
    assert response.status_code == 302 and response["Location"] == "/studio/"
    assert client.get("/studio/")["Location"] == "/studio/corner/"


def test_owner_edits_diffs_publishes_and_rolls_back(store, versions, owner):
    archived, published, draft = versions
    client = Client()
    client.force_login(owner)

    home = client.get("/studio/corner/").content.decode()
    assert "Published: v3" in home and "Draft v4" in home and "Roll back to v2" in home  # v1: the default

    page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert '<span class="d-del">- Be brief.</span>' in page
    assert '<span class="d-add">+ Be brief and kind.</span>' in page

    response = client.post(
        f"/studio/corner/drafts/{draft.pk}/",
        {"system_prompt": "Current prompt.\n<b>Be</b> warm.", "policies": "Returns: 14 days.", "note": "warmer",
         "expected_published": published.pk, "save": "1"},
    )
    assert response.status_code == 302
    page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert "+ &lt;b&gt;Be&lt;/b&gt; warm." in page and "<b>Be</b>" not in page  # escaped
    # Policies are not the prompt's: a posted one is ignored (its one copy is the knowledge document).
    assert "Returns: 14 days." not in page and PromptVersion.objects.get(pk=draft.pk).policies == ""

    # Save and publish, from a page that saw v3 published.
    response = client.post(
        f"/studio/corner/drafts/{draft.pk}/",
        {"system_prompt": "Current prompt.\nBe warm.", "policies": "", "note": "warmer",
         "expected_published": published.pk, "publish": "1"},
    )
    assert response.status_code == 302 and response["Location"] == "/studio/corner/"
    now = services.published_prompt(store)
    assert now.pk == draft.pk and now.system_prompt == "Current prompt.\nBe warm." and now.published_by == owner
    home = client.get("/studio/corner/").content.decode()
    assert "Published: v4" in home and "olivia" in home

    # A tab that still shows v3 as published cannot publish over v4 unseen.
    stale = services.create_draft(store, "stale")
    client.post(f"/studio/corner/drafts/{stale.pk}/",
                {"system_prompt": "stale", "policies": "", "note": "", "expected_published": published.pk, "publish": "1"})
    assert services.published_prompt(store).pk == draft.pk
    assert "was published" in client.get(f"/studio/corner/drafts/{stale.pk}/").content.decode()

    # One click rolls back to v2: a new version with v2's text.
    response = client.post(f"/studio/corner/versions/{archived.pk}/rollback", {"expected_published": draft.pk})
    assert response.status_code == 302
    restored = services.published_prompt(store)
    assert restored.system_prompt == "Old prompt." and restored.restored_from == archived
    history = client.get(f"/studio/corner/versions/{restored.pk}/").content.decode()
    assert "restores v2" in history


def test_sample_questions_are_stored_per_store(store, owner):
    client = Client()
    client.force_login(owner)
    client.post("/studio/corner/questions", {"questions": "Tents?\n\n  Boots for winter?  \n"})
    assert list(SampleQuestion.objects.filter(store=store).values_list("text", flat=True)) == ["Tents?", "Boots for winter?"]
    draft = services.create_draft(store, "Hello.")
    page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert 'data-question="Tents?"' in page and 'data-question="Boots for winter?"' in page
    client.post("/studio/corner/questions", {"questions": "\n".join(f"q{i}" for i in range(11))})
    assert SampleQuestion.objects.filter(store=store).count() == 2  # too many: refused, nothing changed


def test_store_settings_and_embed_snippet(store, owner):
    client = Client()
    client.force_login(owner)
    page = client.get("/studio/corner/settings").content.decode()
    assert "data-store=&quot;corner&quot;" in page and "data-key" not in page  # no key: nothing would read it
    assert "http://testserver/static/widget/widget.js" in page

    data = {
        "name": "Corner Shop & Co", "currency": "eur", "base_url": "https://corner.example",
        "greeting": "Hi!", "answer_max_tokens": "120", "temperature": "0.3",
        "no_match_reply": "Nothing like that here.", "handoff_reply": "Getting someone.",
        "support_timezone": "Europe/Berlin", "support_weekdays": ["0", "2", "4"],
        "support_open": "09:00", "support_close": "17:30",
        "allowed_origins": "https://Shop.Example.com/\nhttps://shop.example.com\nhttp://localhost:8080",
    }
    assert client.post("/studio/corner/settings", data).status_code == 302
    store.refresh_from_db()
    answers, widget = AnswerSettings.objects.get(store=store), WidgetSettings.objects.get(store=store)
    assert (store.name, store.currency, answers.answer_max_tokens, answers.temperature) == ("Corner Shop & Co", "EUR", 120, 0.3)
    assert answers.support_hours == {"timezone": "Europe/Berlin", "weekdays": [0, 2, 4], "open": "09:00", "close": "17:30"}
    assert widget.allowed_origins == "https://shop.example.com\nhttp://localhost:8080"
    assert (answers.greeting, answers.no_match_reply, answers.handoff_reply) == ("Hi!", "Nothing like that here.", "Getting someone.")

    assert answers.model_text == "checked" and answers.opening_templates == {}  # left out: the defaults

    from shop_assistant.chat.answers.opening import DEFAULT_TEMPLATES

    own = {**data, "model_text": "off", "opening_product": "In stock for you: the {product} at {price}.",
           "opening_greeting": "\n".join(DEFAULT_TEMPLATES["greeting"])}  # the defaults as they were shown
    assert client.post("/studio/corner/settings", own).status_code == 302
    answers.refresh_from_db()
    assert answers.model_text == "off"
    assert answers.opening_templates == {"product": ["In stock for you: the {product} at {price}."]}

    bad = {**data, "allowed_origins": "javascript:alert(1)\nhttps://shop.example.com/path", "support_timezone": "Mars/Base",
           "temperature": "5", "opening_product": "We have the {product} for {cost}.", "name": "Renamed"}
    page = client.post("/studio/corner/settings", bad).content.decode()
    assert "is not an origin" in page and "Unknown time zone" in page and "Between 0 and 2" in page
    assert "unknown placeholder {cost}" in page and "needs {price}" in page
    widget.refresh_from_db()
    store.refresh_from_db()
    assert widget.allowed_origins == "https://shop.example.com\nhttp://localhost:8080"
    assert store.name == "Corner Shop & Co"  # the store's own fields were valid, but nothing is saved unless all are

    always = {**data, "support_weekdays": [], "support_open": "", "support_close": ""}
    assert client.post("/studio/corner/settings", always).status_code == 302
    answers.refresh_from_db()
    assert answers.support_hours == {}


def test_admin_cannot_edit_status_or_version(store, versions, owner):
    from shop_assistant.studio.admin import PromptVersionAdmin

    archived, published, draft = versions
    admin_user = make_user("root", None, None)
    admin_user.is_superuser = admin_user.is_staff = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/admin/prompts/promptversion/{draft.pk}/change/").content.decode()
    assert 'name="status"' not in page and 'name="version"' not in page and 'name="system_prompt"' in page
    # A POST that tries to set them anyway changes only the text.
    client.post(f"/admin/prompts/promptversion/{draft.pk}/change/",
                {"system_prompt": "edited in admin", "policies": "", "note": "", "status": "published", "version": "9"})
    draft.refresh_from_db()
    assert (draft.system_prompt, draft.status, draft.version) == ("edited in admin", Status.DRAFT, 4)
    assert services.published_prompt(store) == published
    # Adding in the admin makes a draft with the next number.
    client.post("/admin/prompts/promptversion/add/", {"store": store.pk, "system_prompt": "from admin", "policies": "", "note": ""})
    added = PromptVersion.objects.get(store=store, system_prompt="from admin")
    assert (added.version, added.status, added.created_by) == (5, Status.DRAFT, admin_user)
    # The publish action goes through the service: v5 published, v3 archived, published_at set.
    client.post("/admin/prompts/promptversion/", {"action": "publish_selected", "_selected_action": [added.pk]})
    added.refresh_from_db()
    assert added.status == Status.PUBLISHED and added.published_at is not None
    assert PromptVersion.objects.get(pk=published.pk).status == Status.ARCHIVED
    assert "status" in PromptVersionAdmin.get_readonly_fields(PromptVersionAdmin(PromptVersion, None), None, draft)


# --- with the engine -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_token_count_blocks_and_too_long_warning(store, versions, owner, chat_engine):
    _, published, draft = versions
    client = Client()
    client.force_login(owner)
    tokens = len(system_prefix_ids(chat_engine, draft.full_text()))
    block = chat_engine.block_size
    page = client.get(f"/studio/corner/drafts/{draft.pk}/").content.decode()
    assert f"<span data-tokens>{tokens}</span> tokens" in page
    assert f"<span data-blocks>{-(-tokens // block)}</span> KV blocks of <span data-block-size>{block}</span>" in page
    assert "data-warning hidden" in page

    counted = client.post("/studio/corner/tokens", {"system_prompt": "word " * 600, "policies": ""}).json()
    assert counted["ready"] and counted["tokens"] > 600 and counted["too_long"]
    assert counted["full_blocks"] == counted["tokens"] // block
    assert counted["room"] == chat_engine.max_model_len - counted["tokens"]


async def read_events(response) -> list[dict]:
    body = b"".join([chunk async for chunk in response.streaming_content])
    return [json.loads(part[len(b"data: "):]) for part in body.split(b"\n\n") if part.startswith(b"data: ")]


@pytest.mark.slow
async def test_preview_streams_draft_and_published_under_their_salts(transactional_db, chat_engine, chat_settings):
    from channels.db import database_sync_to_async

    from shop_assistant.studio.preview import cache_salt_for

    def setup():
        store = Store.objects.create(slug="preview", name="Preview Outfitters")
        owner = make_user("pia", store, "owner")
        published = services.publish(services.create_draft(store, "You are a terse shop assistant for hikers."))
        draft = services.create_draft(store, "You are a cheerful shop assistant. Greet every shopper warmly.")
        return store, owner, published, draft

    store, owner, published, draft = await database_sync_to_async(setup)()
    assert cache_salt_for(store, draft) == f"{store.cache_salt}:draft:{draft.pk}"
    assert cache_salt_for(store, published) == store.cache_salt
    client = AsyncClient()
    await client.aforce_login(owner)
    block = chat_engine.block_size

    async def preview(version):
        response = await client.post("/studio/preview/preview", {"version": version.pk, "question": "Hello!"})
        assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
        return await read_events(response)

    first = await preview(draft)
    assert first[-1]["type"] == "end" and any(e["type"] == "token" for e in first)
    assert first[-1]["usage"]["cached_tokens"] == 0
    second = await preview(draft)  # the draft's own salt now holds its prefix
    full = len(system_prefix_ids(chat_engine, draft.full_text())) // block * block
    assert second[-1]["usage"]["cached_tokens"] >= full
    text = "".join(e["text"] for e in second if e["type"] == "token")
    assert text == "".join(e["text"] for e in first if e["type"] == "token")  # temperature 0

    # The same draft text under the shoppers' salt finds nothing: the preview never mixed into their cache.
    from inference import SamplingParams

    from shop_assistant.chat.answers.prompting import assemble, user_turn_content

    ids = assemble(chat_engine.tokenizer, draft.full_text(), [], user_turn_content("Hello!", ""),
                   max_model_len=1024, max_tokens=8).token_ids
    usage = None
    async for delta in chat_engine.stream("salt-probe", ids, SamplingParams(max_tokens=1), cache_salt=store.cache_salt):
        usage = delta.usage or usage
    assert usage.cached_tokens == 0

    published_events = await preview(published)
    assert published_events[-1]["type"] == "end"
    bad = await client.post("/studio/preview/preview", {"version": "999999", "question": "Hello!"})
    assert bad.status_code == 400


@pytest.mark.parametrize("source", ["abc", "99999999999999999999999", "-1"])
def test_a_new_draft_from_an_unreadable_version_is_a_400(store, versions, owner, source):
    client = Client()
    client.force_login(owner)
    before = PromptVersion.objects.count()
    response = client.post("/studio/corner/drafts/new", {"from": source})
    assert response.status_code == 400 and PromptVersion.objects.count() == before


def test_a_preview_of_an_impossible_version_id_is_a_400(store, versions, owner):
    client = Client()
    client.force_login(owner)
    response = client.post("/studio/corner/preview", {"version": "99999999999999999999999", "question": "hi"})
    assert response.status_code == 400


@pytest.mark.slow
async def test_a_draft_that_says_always_answer_in_spanish_previews_and_scores_differently(
    demo_store, chat_engine, chat_settings
):
    """Issue 35's target: the owner's prompt changes what shoppers read, and the studio shows it. The published
    version (the default prompt) answers an English question in English; a draft that adds "Always answer in
    Spanish." and "Suggest the cookset with any stove." previews in Spanish with the cookset's card, its page says
    what was understood (and what it could not resolve), and its score is judged by its own instructions."""
    from channels.db import database_sync_to_async

    from shop_assistant.studio import scoring

    def setup():
        owner = make_user("olivia", demo_store, "owner")
        published = services.published_prompt(demo_store)
        draft = services.create_draft(
            demo_store,
            published.system_prompt + "\n- Always answer in Spanish.\n- Suggest the cookset with any stove."
            "\n- Suggest the espresso maker with any mug.",
        )
        return owner, published, draft

    owner, published, draft = await database_sync_to_async(setup)()
    client = AsyncClient()
    await client.aforce_login(owner)

    page = (await client.get(f"/studio/demo/drafts/{draft.pk}/")).content.decode()
    assert "What the assistant understood from this prompt" in page
    assert "every answer in Spanish" in page and "the Camp Cookset (4 Pieces) is added" in page
    assert "no product of the catalog is called “espresso maker”: nothing is suggested" in page
    assert "Answer in one or two short sentences." in page  # left to the model, and said so

    async def preview(version, question):
        response = await client.post("/studio/demo/preview", {"version": version.pk, "question": question})
        events = await read_events(response)
        cards = next((e["items"] for e in events if e["type"] == "products"), [])
        return events[-1].get("text") or "".join(e["text"] for e in events if e["type"] == "token"), cards

    from catalog import language

    for question in ("Do you have a stove?", "Do you have a rain jacket?"):
        draft_text, draft_cards = await preview(draft, question)
        published_text, published_cards = await preview(published, question)
        print(f"\n{question}\n  published v{published.version}: {published_text}\n  draft v{draft.version}: {draft_text}")
        assert draft_text != published_text
        assert language.detect(published_text) == "en" and language.detect(draft_text) == "es"
    assert [c["title"] for c in draft_cards] == [c["title"] for c in published_cards]  # the jackets: no stove
    stove_draft, stove_cards = await preview(draft, "Do you have a stove?")
    assert [c["title"] for c in stove_cards] == ["Micro Backpacking Stove", "Camp Cookset (4 Pieces)"]
    assert "Camp Cookset (4 Pieces) (64.00 USD) combina bien con Micro Backpacking Stove." in stove_draft

    drafted = await database_sync_to_async(scoring.score_version)(draft.pk)
    scored = await database_sync_to_async(scoring.score_version)(published.pk)
    print(f"scores: published v{published.version} {scored.score}, draft v{draft.version} {drafted.score}")
    for name, version in (("draft", drafted), ("published", scored)):
        for row in version.score_report["questions"]:
            print(name, row["question"], [k for k, ok in row["checks"].items() if not ok], row["answer"][:100])
    # Each version is judged by its own instructions, the language one on both (the shopper's, for the default).
    draft_rows = {row["question"]: row["checks"] for row in drafted.score_report["questions"]}
    published_rows = {row["question"]: row["checks"] for row in scored.score_report["questions"]}
    assert all(checks.get("follows_language", True) for checks in published_rows.values())
    assert "follows_language" in published_rows["Do you have rain jackets?"]
    # The draft's answers are in Spanish, its policy answers too: a Spanish lead above the store's English document
    # quoted word for word (docs/answers.md §2); the language check is each version's own.
    assert draft_rows["Do you have rain jackets?"]["follows_language"] is True
    assert draft_rows["What is your return policy?"]["follows_language"] is True
    assert drafted.score != scored.score
