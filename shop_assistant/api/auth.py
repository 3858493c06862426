"""Bearer API keys and their per-key rate limit (shared through Redis when it is there)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from shop_assistant.runtime import metrics
from shop_assistant.runtime.limits import shared_limits

from .models import ApiKey, hash_key
from .errors import ApiError


def _key_for(token: str) -> ApiKey | None:
    key = ApiKey.objects.select_related("store").filter(key_hash=hash_key(token), revoked=False).first()
    if key is not None:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key


async def authorize(request: HttpRequest) -> ApiKey:
    from asgiref.sync import sync_to_async

    header = request.headers.get("Authorization", "")
    token = header[len("Bearer ") :].strip() if header.startswith("Bearer ") else ""
    key = await sync_to_async(_key_for, thread_sensitive=False)(token) if token and len(token) < 200 else None
    if key is None:
        raise ApiError(401, "Incorrect API key provided.", "invalid_api_key", "authentication_error")
    limit = settings.API.get("requests_per_minute_per_key") or 0
    if limit > 0:
        retry_after = await shared_limits().hit(f"api:{key.pk}", limit, 60.0)
        if retry_after is not None:
            metrics.RATE_LIMITED.labels(limit="api_per_key").inc()
            raise ApiError(
                429,
                f"Rate limit reached: {limit} requests a minute for this key; try again in {retry_after:.0f} s",
                "rate_limit_exceeded",
                "rate_limit_error",
                Retry_After=str(max(1, round(retry_after))),
            )
    return key
