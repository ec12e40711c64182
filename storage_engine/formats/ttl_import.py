"""The import directory: the one place a TTL-index SST file is ingested from.

``ingest_ttl_index`` reads a file by its bare name in ``<data_dir>/import/``, never an
arbitrary path: the node serves untrusted callers, and a path would let them make it
read (and, through error messages, show) any file on its host. A caller either uploads
the file through the node (``PUT /v1/namespaces/{ns}/ttl-index``, which writes it here)
or, sharing the data directory, places it here itself.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from storage_engine.errors import InvalidArgumentError

IMPORT_DIR = "import"
FIELD = "file"
# A bare file name: no "/", no "..", no leading "." (uploads in progress are hidden dot files).
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
FILE_RULE = "must be the bare name of a file in the import directory (1-200 of A-Z a-z 0-9 . _ -, no leading '.')"


def import_dir(data_dir: Path | None) -> Path:
    """``<data_dir>/import/``, created when missing."""
    if data_dir is None:
        raise InvalidArgumentError(FIELD, "this engine has no data directory, so no import directory")
    directory = Path(data_dir) / IMPORT_DIR
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def check_file_name(name: object) -> str:
    if not isinstance(name, str) or not _FILE_NAME.fullmatch(name) or ".." in name:
        raise InvalidArgumentError(FIELD, FILE_RULE)
    return name


def import_file(directory: Path, name: object) -> Path:
    """The regular file ``name`` in ``directory``. A symbolic link is refused: it would lead
    out of the directory."""
    path = directory / check_file_name(name)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise InvalidArgumentError(FIELD, f"{name}: no such file in the node's import directory") from None
    if not stat.S_ISREG(mode):
        raise InvalidArgumentError(FIELD, f"{name}: not a regular file (links and directories are refused)")
    return path
