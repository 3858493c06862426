"""Console pages and actions. Thin: rules in ``roles``, actions in ``services``, the inbox in ``inbox``.

A logged-out visitor asking for a page is sent to the login page; an action from one, and anything from a user
without a store membership, is a 403; a conversation of a store the user does not work for is 403 as well.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from shop_assistant.chat.protocol import identity
from shop_assistant.chat.models import Conversation, Message
from shop_assistant.runtime.params import parse_day, parse_id

from . import customers, inbox, order_requests, placeholders, services, transcripts
from .access import refuse
from shop_assistant.chat.protocol.events import agent_display_name
from .models import Action, CannedReply, Label, Note, Notification, TranscriptExport
from .roles import can_work_on, is_staff_member, stores_for
from .tasks import export_transcripts

View = Callable[..., HttpResponse]


def _forbidden(request: HttpRequest) -> HttpResponse:
    return refuse(request, "console/forbidden.html")


def staff_only(view: View) -> View:
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_staff_member(request.user):
            return _forbidden(request)
        return view(request, *args, **kwargs)

    return wrapper


def conversation_view(view: View) -> View:
    """Staff only, and only conversations of the user's stores; the view gets the conversation."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, pk: uuid.UUID, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_staff_member(request.user):
            return _forbidden(request)
        conversation = get_object_or_404(Conversation.objects.select_related("store", "assigned_to"), pk=pk)
        if not can_work_on(request.user, conversation.store_id):
            return _forbidden(request)
        return view(request, conversation, *args, **kwargs)

    return wrapper


def _notifications(user: Any) -> dict[str, Any]:
    """The bell of every console page: the latest notifications and how many are unread."""
    latest = Notification.objects.filter(user=user).select_related("conversation", "actor")[:10]
    return {"notifications": [services.notification_row(n) | {"read": n.read_at is not None} for n in latest],
            "unread_notifications": services.unread_notifications(user.pk)}


def _action(run: Callable[[], Any]) -> JsonResponse:
    try:
        result = run()
    except services.ConsoleError as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=409)
    payload: dict[str, Any] = {"ok": True}
    if isinstance(result, Conversation):
        payload["status"] = result.status
        payload["assigned_to"] = agent_display_name(result.assigned_to) if result.assigned_to else ""
    return JsonResponse(payload)


# --- pages ---------------------------------------------------------------------------------------------------


@require_GET
@staff_only
def inbox_page(request: HttpRequest) -> HttpResponse:
    filters = inbox.Filters.from_query(request.GET)
    context = {
        "sections": inbox.sections(request.user, filters),
        "filters": filters,
        "stores": stores_for(request.user).order_by("name"),
        "statuses": Conversation.Status.choices,
        "is_owner": stores_for(request.user, role="owner").exists(),
        **_notifications(request.user),
    }
    template = "console/_inbox_sections.html" if request.GET.get("partial") else "console/inbox.html"
    return render(request, template, context, status=400 if filters.errors else 200)


@require_GET
@conversation_view
def conversation_page(request: HttpRequest, conversation: Conversation) -> HttpResponse:
    services.mark_read(request.user, conversation.pk)
    services.read_notifications(request.user, conversation.pk)
    context = {
        "conversation": conversation,
        "title": services.conversation_title(conversation),
        "customer": customers.context_for(conversation),
        "order": order_requests.verified_order(conversation.pk),
        "messages": Message.objects.said().filter(conversation=conversation).order_by("created_at", "id"),
        "notes": Note.objects.filter(conversation=conversation).select_related("author"),
        "actions": [(a, services.describe(a)) for a in
                    Action.objects.filter(conversation=conversation).select_related("user")],
        "labels": Label.objects.filter(store=conversation.store),
        "my_labels": set(conversation.labels.values_list("pk", flat=True)),
        "canned": [{"id": c.pk, "shortcut": c.shortcut, "text": c.text}
                   for c in CannedReply.objects.filter(store=conversation.store)],
        "assignees": [(u.pk, agent_display_name(u)) for u in services.assignees(conversation.store_id)],
        "mine": conversation.status == Conversation.Status.AGENT and conversation.assigned_to_id == request.user.pk,
        "me": agent_display_name(request.user),
        # What the page fills canned replies with (the server fills and checks them again when sending).
        "placeholders": {"values": placeholders.values_for(conversation, request.user),
                         "meaning": placeholders.PLACEHOLDERS},
        **_notifications(request.user),
    }
    return render(request, "console/conversation.html", context)


# --- actions (JSON, CSRF-protected POSTs from console.js or plain forms) --------------------------------------


def _state_change(change: Callable[[Any, Any], Conversation]) -> Callable[..., JsonResponse]:
    """A POST that moves the conversation by ``change(agent, conversation id)``: take over, hand back, close,
    reopen."""

    @require_POST
    @conversation_view
    def view(request: HttpRequest, conversation: Conversation) -> JsonResponse:
        return _action(lambda: change(request.user, conversation.pk))

    view.__name__ = view.__qualname__ = change.__name__
    return view


take_over = _state_change(services.take_over)
hand_back = _state_change(services.hand_back)
close = _state_change(services.close)
reopen = _state_change(services.reopen)


@require_POST
@conversation_view
def reply(request: HttpRequest, conversation: Conversation) -> JsonResponse:
    canned = parse_id(request.POST.get("canned", ""))
    return _action(lambda: services.reply(request.user, conversation.pk, request.POST.get("text", ""), canned))


@require_POST
@conversation_view
def assign(request: HttpRequest, conversation: Conversation) -> JsonResponse:
    assignee = parse_id(request.POST.get("assignee", ""))
    if assignee is None:
        return JsonResponse({"ok": False, "error": "pick an agent of this store"}, status=400)
    return _action(lambda: services.assign(request.user, conversation.pk, assignee))


@require_POST
@conversation_view
def add_note(request: HttpRequest, conversation: Conversation) -> JsonResponse:
    try:
        note = services.add_note(request.user, conversation.pk, request.POST.get("text", ""))
    except services.ConsoleError as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=409)
    return JsonResponse(
        {"ok": True, "note": {"id": note.pk, "text": note.text, "author": agent_display_name(request.user),
                              "created_at": note.created_at.isoformat()}}
    )


@require_POST
@conversation_view
def label(request: HttpRequest, conversation: Conversation) -> JsonResponse:
    on = request.POST.get("on", "1") == "1"
    return _action(lambda: services.set_label(request.user, conversation.pk, request.POST.get("name", ""), on))


@require_POST
@staff_only
def read_notifications(request: HttpRequest) -> JsonResponse:
    services.read_notifications(request.user)
    return JsonResponse({"ok": True, "unread": 0})


@require_POST
@conversation_view
def mark_read(request: HttpRequest, conversation: Conversation) -> JsonResponse:
    services.mark_read(request.user, conversation.pk)
    return JsonResponse({"ok": True})


# --- transcripts -----------------------------------------------------------------------------------------------


def _attachment(content: str, fmt: str, name: str) -> HttpResponse:
    content_type = "application/json" if fmt == "json" else "text/csv; charset=utf-8"
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@require_GET
@conversation_view
def export_conversation(request: HttpRequest, conversation: Conversation, fmt: str) -> HttpResponse:
    if fmt not in TranscriptExport.Format.values:
        raise Http404("format must be csv or json")
    content = transcripts.render(Conversation.objects.filter(pk=conversation.pk).select_related("store"), fmt)
    services.record_export(request.user, conversation, fmt)
    return _attachment(content, fmt, f"conversation-{conversation.pk}")


@require_POST
@staff_only
def start_export(request: HttpRequest) -> JsonResponse:
    raw_store = request.POST.get("store", "")
    store = parse_id(raw_store)
    fmt = request.POST.get("format", "csv")
    if fmt not in TranscriptExport.Format.values:
        return JsonResponse({"ok": False, "error": "format must be csv or json"}, status=400)
    if raw_store and store is None:
        return JsonResponse({"ok": False, "error": "store must be a store's id"}, status=400)
    if store is not None and not can_work_on(request.user, store):
        return _forbidden(request)
    try:
        date_from = parse_day(request.POST.get("from"), "from")
        date_to = parse_day(request.POST.get("to"), "to")
    except ValueError as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=400)
    export = TranscriptExport.objects.create(
        user=request.user, store_id=store, format=fmt, date_from=date_from, date_to=date_to
    )
    Action.objects.create(user=request.user, kind=Action.Kind.EXPORT, detail={"export": export.pk, "format": fmt})
    export_transcripts.delay(export.pk)
    return JsonResponse({"ok": True, "id": export.pk, "progress_url": f"/console/exports/{export.pk}/"})


def _own_export(request: HttpRequest, pk: int) -> TranscriptExport:
    return get_object_or_404(TranscriptExport, pk=pk, user=request.user)


@require_GET
@staff_only
def export_progress(request: HttpRequest, pk: int) -> JsonResponse:
    export = _own_export(request, pk)
    return JsonResponse(
        {
            "status": export.status,
            "done": export.done,
            "total": export.total,
            "progress": round(export.progress, 3),
            "download_url": f"/console/exports/{export.pk}/download" if export.status == "done" else None,
            "error": export.error,
        }
    )


@require_GET
@staff_only
def export_download(request: HttpRequest, pk: int) -> HttpResponse:
    export = _own_export(request, pk)
    if export.status != TranscriptExport.Status.DONE:
        return JsonResponse({"ok": False, "error": "not ready"}, status=409)
    return _attachment(export.content, export.format, f"transcripts-{export.pk}")


# --- canned replies and labels (the store's staff keep them on their own pages) --------------------------------


def _store_item_form(
    request: HttpRequest, model: Any, fields: dict[str, str], role: str, create_role: str | None = None
) -> tuple[Any, str]:
    """Create or (with ``pk``) edit one canned reply or label of a store the user holds ``role`` in (to create
    one, ``create_role`` when given). (item, "") when saved; (None, error) when it did not validate; raises
    PermissionError when the store is not theirs."""
    pk = parse_id(request.POST.get("pk", ""))
    if pk is not None:
        item = get_object_or_404(model, pk=pk)
        if not can_work_on(request.user, item.store_id, role=role):
            raise PermissionError
    else:
        store = parse_id(request.POST.get("store"))
        if store is None or not can_work_on(request.user, store, role=create_role or role):
            raise PermissionError
        item = model(store_id=store)
    for name, value in fields.items():
        setattr(item, name, value)
    try:
        item.full_clean()
    except ValidationError as exc:
        return None, "; ".join(exc.messages)
    item.save()
    return item, ""


@staff_only
def canned_replies(request: HttpRequest) -> HttpResponse:
    """Every agent and owner of a store writes, edits and deletes its canned replies (as in Chatwoot)."""
    error = ""
    if request.method == "POST":
        fields = {"shortcut": request.POST.get("shortcut", "").strip().lower(),
                  "text": request.POST.get("text", "").strip()}
        unknown = placeholders.unknown_names(fields["text"])
        try:
            if unknown:  # a typo ("{frist_name}") would block every reply made from it
                raise ValidationError(f"the console fills no {', '.join('{' + n + '}' for n in unknown)}: use "
                                      + ", ".join("{" + n + "}" for n in placeholders.PLACEHOLDERS))
            _, error = _store_item_form(request, CannedReply, fields, role="agent")
        except ValidationError as exc:
            error = "; ".join(exc.messages)
        except PermissionError:
            return _forbidden(request)
        if not error:
            return redirect("console:canned")
    stores = stores_for(request.user).order_by("name")
    context = {
        "replies": CannedReply.objects.filter(store__in=stores_for(request.user)).select_related("store"),
        "stores": stores,
        "editing": parse_id(request.GET.get("edit", "")),
        "placeholders": placeholders.PLACEHOLDERS,
        "error": error,
    }
    return render(request, "console/canned.html", context, status=400 if error else 200)


@require_POST
@staff_only
def delete_canned_reply(request: HttpRequest, pk: int) -> HttpResponse:
    reply = get_object_or_404(CannedReply, pk=pk)
    if not can_work_on(request.user, reply.store_id):
        return _forbidden(request)
    reply.delete()
    return redirect("console:canned")


@staff_only
def labels_page(request: HttpRequest) -> HttpResponse:
    """The store's preset labels, with their colours: agents and owners add them (as a conversation needs one);
    owners recolour and remove them, as that changes every conversation that has the label."""
    error = ""
    if request.method == "POST":
        fields = {"name": request.POST.get("name", "").strip()[:50], "color": request.POST.get("color", "").strip()}
        store = parse_id(request.POST.get("store"))
        creating = "pk" not in request.POST and store is not None and can_work_on(request.user, store)
        try:
            same = Label.objects.filter(store_id=store, name__iexact=fields["name"]).first() if creating else None
            if same is not None and fields["name"]:
                raise ValidationError(f"{same.name!r} is already a label of this store")  # one "refund", not two
            _, error = _store_item_form(request, Label, fields, role="owner", create_role="agent")
        except ValidationError as exc:
            error = "; ".join(exc.messages)
        except PermissionError:
            return _forbidden(request)
        if not error:
            return redirect("console:labels")
    context = {
        "labels": Label.objects.filter(store__in=stores_for(request.user)).select_related("store").order_by(
            "store__name", "name"),
        "stores": stores_for(request.user).order_by("name"),
        "owned": set(stores_for(request.user, role="owner").values_list("pk", flat=True)),
        "colors": Label.COLORS,
        "error": error,
    }
    return render(request, "console/labels.html", context, status=400 if error else 200)


@require_POST
@staff_only
def delete_label(request: HttpRequest, pk: int) -> HttpResponse:
    label = get_object_or_404(Label, pk=pk)
    if not can_work_on(request.user, label.store_id, role="owner"):
        return _forbidden(request)
    label.delete()
    return redirect("console:labels")


@require_GET
def identity_page(request: HttpRequest) -> HttpResponse:
    """Owners only: the key each of their stores signs its customers with (docs/console/README.md), and how."""
    stores = stores_for(request.user, role="owner").order_by("name")
    if not stores.exists():
        return _forbidden(request)
    return render(request, "console/identity.html", {"stores": [(s, identity.store_secret(s)) for s in stores]})
