"""The studio's orders forms: an upload (the catalog's upload form, for order files), and the store's database
as the source, checked the way the catalog's database sources are (``catalog_forms.sql_source``)."""

from __future__ import annotations

from django import forms

from catalog import outbound
from shop_assistant.orders.ingest import validate_mapping
from shop_assistant.orders.models import OrderSource

from .catalog_forms import UploadForm, sql_source, without_password

ORDERS_SQL_EXAMPLE = ('{"orders": {"table": "orders", "key": "id", "columns": {"number": "order_no", "email": '
                      '"customer_email", "placed_at": "created", "fulfillment_status": "state"}}, "lines": {"table": '
                      '"order_items", "order_key": "order_id", "columns": {"title": "product_name", "price": "unit_price"}}}')


class OrderUploadForm(UploadForm):
    """A Shopify orders export or a JSON order feed: the catalog's checks (size, format, encoding, not empty)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = "A Shopify orders CSV export or a JSON order feed (at most 20 MiB)."
        self.fields["import_format"].choices = [("", "Detect from the file name"), ("shopify", "Shopify orders CSV"),
                                                ("json", "JSON order feed")]


class OrderSourceForm(forms.Form):
    location = forms.CharField(max_length=1000, label="Database URL",
                               help_text="A SQLAlchemy URL, such as postgresql+psycopg://shop@db.example.com/shop")
    password = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                               help_text="Kept out of the URL shown on this page.")
    mapping_text = forms.CharField(label="Tables and columns (JSON)", widget=forms.Textarea(attrs={"rows": 8}),
                                   help_text="Our fields to your columns, e.g. " + ORDERS_SQL_EXAMPLE)

    def clean(self) -> dict:
        data = super().clean()
        if data.get("location") and data.get("mapping_text"):
            data["location"], data["mapping"] = sql_source(
                data["location"].strip(), data.get("password") or "", data["mapping_text"], validate_mapping)
        return data

    def shown_again(self) -> OrderSourceForm:
        return without_password(self, sql=True)


class OrderScheduleForm(forms.Form):
    schedule = forms.ChoiceField(choices=OrderSource.Schedule.choices, label="Import on a schedule")


class OrderWebhookForm(forms.Form):
    """The owner's webhook URL, checked against the operator's outbound rules now (and again at each delivery)."""

    url = forms.URLField(max_length=1000, label="Webhook URL", assume_scheme="https",
                         help_text="We POST each request and each decision here, signed with the secret below.")

    def clean_url(self) -> str:
        url = self.cleaned_data["url"].strip()
        try:
            outbound.check_feed_url(url)
        except outbound.Refused as exc:
            raise forms.ValidationError(str(exc).replace("a feed must", "a webhook must")) from None
        return url
