"""Opt-in download of the data files into a cache directory, checked by SHA-256.

Nothing is downloaded unless asked (``download=True`` or ``CHEFS_DOWNLOAD=1``).
A file is written to a temporary name, its SHA-256 is checked against the
one recorded in ``SOURCES.md``, and only then renamed into place; a file that
does not match is deleted and the next mirror is tried.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

__all__ = [
    "CACHE_ENV",
    "DOWNLOAD_ENV",
    "MIRROR_ENV",
    "cache_dir",
    "download_enabled",
    "fetch",
    "sha256_file",
]

CACHE_ENV = "CHEFS_CACHE"
"""Environment variable overriding the cache directory."""
DOWNLOAD_ENV = "CHEFS_DOWNLOAD"
"""Set to 1 to allow downloads."""
MIRROR_ENV = "CHEFS_MIRROR"
"""Optional base URL tried first: the file is fetched from ``<base>/<filename>``."""

_TIMEOUT_S = 30.0


def cache_dir() -> Path:
    """The download cache: ``$CHEFS_CACHE``, else ``$XDG_CACHE_HOME/chefs/data``,
    else ``~/.cache/chefs/data``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "chefs" / "data"


def download_enabled(download=None) -> bool:
    """Whether downloading is allowed: ``download`` if given, else ``$CHEFS_DOWNLOAD``."""
    if download is not None:
        return bool(download)
    return os.environ.get(DOWNLOAD_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def sha256_file(path) -> str:
    """Hex SHA-256 digest of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(filename: str, sha256: str, urls, cache=None) -> Path:
    """Download ``filename`` into the cache (if not already there and valid).

    Parameters
    ----------
    filename : str
        Name of the file in the cache.
    sha256 : str
        Expected hex digest.
    urls : sequence of str
        Mirrors, tried in order (``$CHEFS_MIRROR/<filename>`` first when set).
        Only ``http`` and ``https`` URLs are used.
    cache : path-like, optional
        Cache directory (default :func:`cache_dir`).

    Returns
    -------
    pathlib.Path
        The verified file in the cache.

    Raises
    ------
    ValueError
        When no mirror delivers a file with the expected digest (the message
        lists what went wrong with each).
    """
    cache = Path(cache) if cache is not None else cache_dir()
    target = cache / filename
    if target.is_file() and sha256_file(target) == sha256:
        return target
    mirrors = list(urls)
    base = os.environ.get(MIRROR_ENV)
    if base:
        mirrors.insert(0, base.rstrip("/") + "/" + filename)
    if not mirrors:
        raise ValueError(f"no download address is known for {filename}")
    cache.mkdir(parents=True, exist_ok=True)
    problems = []
    for url in mirrors:
        if not url.lower().startswith(("http://", "https://")):
            problems.append(f"{url}: not an http(s) address")
            continue
        tmp = cache / f".{filename}.{os.getpid()}.part"
        try:
            with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp, open(tmp, "wb") as out:
                for block in iter(lambda: resp.read(1 << 20), b""):
                    out.write(block)
            got = sha256_file(tmp)
            if got != sha256:
                problems.append(f"{url}: SHA-256 {got[:12]}... does not match the expected {sha256[:12]}...")
                continue
            os.replace(tmp, target)
            return target
        except (urllib.error.URLError, OSError, ValueError) as err:
            problems.append(f"{url}: {err}")
        finally:
            if tmp.exists():
                tmp.unlink()
    raise ValueError(f"could not download {filename}: " + "; ".join(problems))
