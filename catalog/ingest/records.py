"""What every source is parsed into before it touches the database, and the value parsers they share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from html import unescape
from html.parser import HTMLParser


class SourceError(Exception):
    """The source as a whole cannot be read (wrong format, unreachable, bad mapping)."""


class RowProblem(ValueError):
    """A value in one row that cannot be imported; the message is shown to the person importing."""


@dataclass
class RowError:
    line: int | None
    where: str
    reason: str
    handle: str = ""
    sku: str = ""

    def as_dict(self) -> dict:
        return {"line": self.line, "where": self.where, "handle": self.handle, "sku": self.sku, "reason": self.reason}


@dataclass
class VariantRecord:
    line: int | None
    where: str
    sku: str
    options: tuple[str, str, str]
    price: Decimal
    compare_at_price: Decimal | None = None
    currency: str = ""
    inventory_quantity: int = 0
    inventory_policy: str = "deny"
    image_src: str = ""


@dataclass
class ImageRecord:
    src: str
    position: int = 0
    alt_text: str = ""


@dataclass
class ProductRecord:
    handle: str
    line: int | None
    where: str
    title: str = ""
    description_html: str = ""
    # Plain text given by the source; when None it is derived from the HTML.
    description: str | None = None
    vendor: str = ""
    product_type: str = ""
    tags: str = ""
    status: str = "active"
    option_names: list[str] = field(default_factory=list)
    variants: list[VariantRecord] = field(default_factory=list)
    images: list[ImageRecord] = field(default_factory=list)
    # Problems that make the whole product unimportable (e.g. no title); variant problems go to errors.
    fatal: list[str] = field(default_factory=list)
    variant_failures: int = 0


@dataclass
class DocumentRecord:
    kind: str
    title: str
    body: str
    line: int | None = None
    where: str = ""


@dataclass
class ParsedCatalog:
    products: list[ProductRecord] = field(default_factory=list)
    documents: list[DocumentRecord] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    # Rows that could not be tied to any product (e.g. no handle): counted as failed products...
    orphan_failures: int = 0
    # ...or, for variant rows naming a product that is not there, as failed variants.
    orphan_variant_failures: int = 0


_PRICE_RE = re.compile(r"^[$€£¥]?\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s*(?:[A-Za-z]{3})?$")
_DEFAULT_OPTION_NAMES = {"title"}
_DEFAULT_OPTION_VALUES = {"default title", "default"}


def parse_price(value: object, what: str = "price", required: bool = True) -> Decimal | None:
    """A non-negative amount with at most two decimals; accepts numbers and strings like "$19.99"."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RowProblem(f"missing {what}")
        return None
    if isinstance(value, bool):
        raise RowProblem(f"unparsable {what} {value!r}")
    if isinstance(value, (int, float, Decimal)):
        text = str(value)
    else:
        # Thousands separators only ("1,299.00"); "19,99" is ambiguous and refused rather than misread.
        match = _PRICE_RE.match(str(value).strip())
        if not match:
            raise RowProblem(f"unparsable {what} {str(value)!r}")
        text = match.group(1).replace(",", "")
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise RowProblem(f"unparsable {what} {str(value)!r}") from None
    if not amount.is_finite():
        raise RowProblem(f"unparsable {what} {str(value)!r}")
    if amount < 0:
        raise RowProblem(f"negative {what} {str(value)!r}")
    if amount >= Decimal("1e10"):
        raise RowProblem(f"{what} {str(value)!r} is too large")
    return amount.quantize(Decimal("0.01"))


def parse_quantity(value: object) -> int:
    """Inventory count: empty means 0; negative counts are refused rather than guessed at."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    if isinstance(value, bool):
        raise RowProblem(f"unparsable inventory quantity {value!r}")
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise RowProblem(f"unparsable inventory quantity {str(value)!r}") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise RowProblem(f"unparsable inventory quantity {str(value)!r}")
    if number < 0:
        raise RowProblem(f"negative inventory {int(number)}")
    return int(number)


def parse_policy(value: object) -> str:
    text = str(value or "").strip().lower()
    if text in ("", "deny"):
        return "deny"
    if text == "continue":
        return "continue"
    raise RowProblem(f"unknown inventory policy {str(value)!r} (expected deny or continue)")


def parse_status(value: object, default: str = "active") -> str:
    text = str(value if value is not None else "").strip().lower()
    if text == "":
        return default
    if text in ("active", "draft", "archived"):
        return text
    if text in ("true", "1", "yes", "published"):
        return "active"
    if text in ("false", "0", "no", "unpublished"):
        return "draft"
    raise RowProblem(f"unknown status {str(value)!r}")


def normalise_tags(value: object) -> str:
    if value is None:
        return ""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    seen: dict[str, None] = {}
    for item in items:
        tag = str(item).strip()
        if tag and tag.lower() not in {t.lower() for t in seen}:
            seen[tag] = None
    return ", ".join(seen)


def clean_option_names(names: list[str]) -> list[str]:
    """Shopify writes "Title" for products without options; that is no option at all."""
    names = [str(name or "").strip() for name in names]
    if len(names) >= 1 and names[0].lower() in _DEFAULT_OPTION_NAMES and not any(names[1:]):
        return []
    while names and not names[-1]:
        names.pop()
    return names


def clean_option_values(values: list[object]) -> tuple[str, str, str]:
    cleaned = [str(value or "").strip() for value in values][:3]
    if cleaned and cleaned[0].lower() in _DEFAULT_OPTION_VALUES and not any(cleaned[1:]):
        cleaned = []
    cleaned += [""] * (3 - len(cleaned))
    return (cleaned[0], cleaned[1], cleaned[2])


class _TextExtractor(HTMLParser):
    _BLOCKS = {"p", "div", "br", "ul", "ol", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")
            if tag == "li":
                self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Readable plain text of a product body: block elements become lines, list items get a dash."""
    if not html:
        return ""
    if "<" not in html:
        return re.sub(r"[ \t]+", " ", unescape(html)).strip()
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    lines = [re.sub(r"\s+", " ", line).strip() for line in "".join(extractor.parts).split("\n")]
    return "\n".join(line for line in lines if line and line != "-")
