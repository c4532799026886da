"""Fetch a named Debian package version and read files out of it, with nothing but the standard
library (a ``.deb`` is an ``ar`` archive holding ``data.tar.xz``), so that a dataset builder runs
on any machine that reaches a Debian mirror."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import GandalfError
from ...paths import cache_root

DEFAULT_MIRROR = "https://deb.debian.org/debian"
# where a version that a later point release replaced can still be found
SNAPSHOT_HINT = "https://snapshot.debian.org/archive/debian/20250520T000000Z"


@dataclass(frozen=True)
class DebianPackage:
    """One package version in the archive: ``pool`` is its path under the mirror's root."""

    name: str
    version: str
    pool: str
    sha256: str
    size: int  # bytes of the .deb: a download stops there

    @property
    def file_name(self) -> str:
        # a release's index is named by its whole path: every release's is called Packages.xz
        return self.pool.replace("/", "_") if self.pool.startswith("dists/") else self.pool.rsplit("/", 1)[-1]


def cache_dir() -> Path:
    """Where downloaded packages are kept (``$GANDALF_CACHE/debs``, else ``~/.cache/gandalf-xmc/debs``)."""
    return cache_root() / "debs"


def _writable_cache() -> Path:
    from ...paths import cache_dir as made_cache_dir

    return made_cache_dir("debs")


def fetch(package: DebianPackage, mirror: str = DEFAULT_MIRROR, log: Callable[[str], None] | None = None) -> Path:
    """The package's ``.deb``, downloaded once and checked against its SHA-256."""
    target = cache_dir() / package.file_name
    if target.is_file() and _sha256(target) == package.sha256:
        return target
    _writable_cache()
    url = f"{mirror.rstrip('/')}/{package.pool}"
    if log:
        log(f"downloading {url}")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        digest = _download(url, tmp, package.size)
        if digest != package.sha256:
            raise GandalfError(f"{url}: SHA-256 {digest} is not the pinned {package.sha256}")
        os.replace(tmp, target)
    except OSError as exc:
        raise GandalfError(
            f"cannot download {package.name} {package.version} from {url} ({exc}); if a later "
            f"point release replaced it, pass --mirror {SNAPSHOT_HINT}"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _download(url: str, to: Path, size: int, block: int = 1 << 20) -> str:
    """Stream ``url`` into ``to``, hashing as it comes; stop with a GandalfError as soon as it
    passes ``size`` bytes (an endless or wrong answer costs at most that), or if it ends short.
    Returns the SHA-256."""
    digest, received = hashlib.sha256(), 0
    with urllib.request.urlopen(url, timeout=120) as response, open(to, "wb") as out:
        declared = response.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) != size:
            raise GandalfError(f"{url}: the server announces {int(declared):,} bytes, not the pinned {size:,}")
        while True:
            chunk = response.read(min(block, size + 1 - received))
            if not chunk:
                break
            received += len(chunk)
            if received > size:
                raise GandalfError(f"{url}: more than the pinned {size:,} bytes; stopped")
            digest.update(chunk)
            out.write(chunk)
    if received != size:
        raise GandalfError(f"{url}: ended after {received:,} of the pinned {size:,} bytes")
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ar_members(blob: bytes) -> Iterator[tuple[str, bytes]]:
    if not blob.startswith(b"!<arch>\n"):
        raise GandalfError("not a Debian package (no ar header)")
    pos = 8
    while pos + 60 <= len(blob):
        header = blob[pos : pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        yield name, blob[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size & 1)


def regular_files(deb: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    """``{path: content}`` of the regular files of :func:`package_files` (symbolic links left out)."""
    return {path: content for path, content in package_files(deb, wanted) if isinstance(content, bytes)}


def package_files(deb: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes | str]]:
    """``(path, content)`` of the files in the package's data archive for which ``wanted(path)``
    holds, in archive order; a symbolic link's content is its target as a ``str``. Paths have no
    leading ``./``."""
    for name, member in _ar_members(deb.read_bytes()):
        if not name.startswith("data.tar"):
            continue
        with tarfile.open(fileobj=io.BytesIO(member), mode="r:*") as tar:
            for info in tar:
                path = info.name.removeprefix("./")
                if not wanted(path):
                    continue
                if info.issym():
                    yield path, info.linkname
                elif info.isfile():
                    member_file = tar.extractfile(info)
                    assert member_file is not None  # a regular member always has a file
                    yield path, member_file.read()
        return
    raise GandalfError(f"{deb}: no data archive inside")
