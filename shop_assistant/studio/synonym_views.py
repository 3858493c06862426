"""The studio's search synonyms page (under the catalog): list, add, delete, upload a CSV, export it, and accept
the translation generator's proposals. Thin: the rules are ``catalog.synonyms``'s. Owners of the store only.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from catalog import synonyms
from catalog.forms import MAX_UPLOAD_BYTES, decode_upload
from catalog.models import SearchSynonym, Store

from .form_views import form_view, page_view
from .views import owners_only


class SynonymForm(forms.Form):
    language = forms.ChoiceField(choices=SearchSynonym.Language.choices, initial="es")
    term = forms.CharField(max_length=synonyms.MAX_TERM, label="Shopper's word(s)",
                           help_text='As a shopper writes it, e.g. "chaqueta impermeable".')  # fmt: skip
    replacement = forms.CharField(max_length=synonyms.MAX_REPLACEMENT, label="Your store's word(s)",
                                  help_text='The words your catalog uses, e.g. "rain jacket".')  # fmt: skip

    def clean(self) -> dict:
        data = super().clean()
        if {"language", "term", "replacement"} <= data.keys():
            problem = synonyms.check(data["language"], data["term"], data["replacement"])
            if problem:
                raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return data


class SynonymUploadForm(forms.Form):
    file = forms.FileField(help_text="CSV rows: language,term,replacement (es, fr, de or en), as the export writes.")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB.")
        return upload


def _url(store: Store, anchor: str = "") -> str:
    return reverse("studio:synonyms", kwargs={"slug": store.slug}) + (f"#{anchor}" if anchor else "")


def _page(request: HttpRequest, store: Store, form=None, upload_form=None, status: int = 200) -> HttpResponse:
    rows = SearchSynonym.objects.filter(store=store)
    return render(
        request,
        "studio/synonyms.html",
        {
            "store": store,
            "form": form or SynonymForm(),
            "upload_form": upload_form or SynonymUploadForm(),
            "accepted": rows.filter(status=SearchSynonym.Status.ACCEPTED),
            "proposed": rows.filter(status=SearchSynonym.Status.PROPOSED),
        },
        status=status,
    )


synonyms_page = page_view(_page)


def _save(request: HttpRequest, store: Store, data: dict) -> HttpResponse:
    synonyms.save(store, [(data["language"], data["term"], data["replacement"])], source=SearchSynonym.Source.OWNER)
    messages.success(request, f"{data['term']} → {data['replacement']} ({data['language']}) saved.")
    return redirect(_url(store, "synonyms"))


add = form_view(SynonymForm, _page, _save, "form")


@require_POST
@owners_only
def delete(request: HttpRequest, store: Store, synonym_id: int) -> HttpResponse:
    synonym = get_object_or_404(SearchSynonym, store=store, pk=synonym_id)
    synonym.delete()
    messages.success(request, f"{synonym.term} ({synonym.language}) deleted.")
    return redirect(_url(store, "synonyms"))


@require_POST
@owners_only
def accept(request: HttpRequest, store: Store) -> HttpResponse:
    ids = [int(value) for value in request.POST.getlist("synonym") if value.isdigit()]
    accepted = synonyms.accept(store, None if request.POST.get("all") else ids)
    messages.success(request, f"{accepted} proposal{'s' if accepted != 1 else ''} accepted: the search uses them now.")
    return redirect(_url(store, "proposed" if accepted == 0 else "synonyms"))


def _import_upload(request: HttpRequest, store: Store, data: dict) -> HttpResponse:
    result = synonyms.import_csv(store, decode_upload(data["file"].read()))
    messages.success(request, f"{result.added} added, {result.updated} updated.")
    for error in result.errors[:10]:
        messages.error(request, error)
    return redirect(_url(store, "synonyms"))


upload = form_view(SynonymUploadForm, _page, _import_upload, "upload_form")


@require_GET
@owners_only
def export(request: HttpRequest, store: Store) -> HttpResponse:
    response = HttpResponse(synonyms.export_csv(store), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{store.slug}-synonyms.csv"'
    return response
