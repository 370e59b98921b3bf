"""A JSON file as it is stored: plain (what a run writes) or compressed, X.json.xz or X.json.gz (the reference runs
in results/reference/), read alike. A path to X.json that no longer exists is read from X.json.xz beside it, so the
names a sweep's index, a diagnosis or an older command gives still lead to the file. Imports the standard library
only."""

from __future__ import annotations

import gzip
import json
import lzma
import zlib
from pathlib import Path
from typing import Any

# A compressed JSON file's suffix after .json → how its bytes are decompressed, in the order a missing X.json's
# stand-ins are looked for.
DECOMPRESSORS = {".xz": lzma.decompress, ".gz": gzip.decompress}
# What a damaged compressed file raises (a truncated one: EOFError); read_json_text says ValueError instead.
DECOMPRESSION_ERRORS = (lzma.LZMAError, zlib.error, gzip.BadGzipFile, EOFError)


def is_compressed(path: Path) -> bool:
    """Whether the file's name says its bytes are compressed (X.json.xz, X.json.gz)."""
    return path.suffix in DECOMPRESSORS


def stored_path(path: Path) -> Path:
    """The file a JSON path stands for: the path itself when it exists (or is not a .json), else its first
    compressed copy beside it (X.json → X.json.xz, X.json.gz), else the path itself."""
    path = Path(path)
    if path.suffix != ".json" or path.exists():
        return path
    copies = [path.with_name(path.name + suffix) for suffix in DECOMPRESSORS]
    return next((copy for copy in copies if copy.is_file()), path)


def read_json_text(path: Path) -> str:
    """The JSON text of a plain or compressed file (via stored_path); a damaged compressed file is a ValueError."""
    path = stored_path(path)
    if not is_compressed(path):
        return path.read_text()
    try:
        return DECOMPRESSORS[path.suffix](path.read_bytes()).decode("utf-8")
    except DECOMPRESSION_ERRORS as exc:
        raise ValueError(f"{path.name} is not a readable {path.suffix} file ({exc})") from None


def read_json(path: Path) -> Any:
    """The JSON value of a plain or compressed file (read_json_text, parsed)."""
    return json.loads(read_json_text(path))


def json_stem(path: Path) -> str:
    """The file's name less .json and any compression suffix: the name its .md, .csv and .html siblings share."""
    name = Path(path).name
    if is_compressed(Path(name)):
        name = Path(name).stem
    return name.removesuffix(".json") if name.endswith(".json") else Path(name).stem


def sibling(path: Path, suffix: str) -> Path:
    """The file beside a JSON file that shares its stem: sibling(X.json.xz, ".md") is X.md."""
    return Path(path).with_name(json_stem(path) + suffix)
