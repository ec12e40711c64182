"""The object-store tier behind one small interface (:class:`ObjectTier`), over ``obstore``.

A tier is named by a URI, node configuration (``EngineConfig.tier_uri``), never policy:

- ``file:///abs/dir`` — a directory (the embedded default: ``<data_dir>-tier`` next to the
  data directory; :func:`default_tier_uri`);
- ``s3://bucket[/prefix]`` — an S3-compatible bucket. Endpoint and credentials come from the
  environment: ``TIER_S3_ENDPOINT`` (e.g. ``http://127.0.0.1:8333``; unset: AWS),
  ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` (optional),
  ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` (default ``us-east-1``). ``http://`` endpoints are
  allowed (a local S3 server); requests use path style.

Keys are ``/``-separated paths relative to the tier's root (see :mod:`storage_engine.tier.layout`).
Secrets are never logged or put into an error: :attr:`ObjectTier.uri` is the URI without any
user info, and errors name the URI, the key and the operation only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import BaseError as ObstoreError
from obstore.exceptions import NotFoundError
from obstore.store import LocalStore, S3Store

from storage_engine.errors import InvalidArgumentError, ObjectMissingError, TierError
from storage_engine.tier import checksum as checksums

SCHEMES = ("file", "s3")
READ_CHUNK = 8 << 20  # bytes per chunk when an object is streamed back (verification)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a HEAD or a listing says of one object."""

    key: str
    size: int
    etag: str | None


def default_tier_uri(data_dir: Path) -> str:
    """The embedded default: a directory beside the data directory (``var/data`` → ``var/data-tier``)."""
    root = Path(data_dir).resolve()
    return (root.parent / f"{root.name}-tier").as_uri()


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]


class ObjectTier:
    """An object store named by a URI; every call is synchronous and thread-safe (obstore
    releases the GIL while it waits). The store is built on first use, so an engine whose
    namespaces never offload never touches it."""

    def __init__(self, uri: str, env: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(uri)
        if parts.scheme not in SCHEMES:
            raise InvalidArgumentError("tier_uri", f"must be a file:// or s3:// URI, got scheme {parts.scheme!r}")
        if parts.scheme == "s3" and not parts.hostname:
            raise InvalidArgumentError("tier_uri", "an s3:// URI names a bucket: s3://bucket[/prefix]")
        if parts.scheme == "file" and not parts.path.startswith("/"):
            raise InvalidArgumentError("tier_uri", "a file:// URI names an absolute directory: file:///dir")
        self.scheme = parts.scheme
        # Shown in errors and logs: no user info, query or fragment (they could carry secrets).
        host = parts.hostname or ""
        self.uri = f"{parts.scheme}://{host}{parts.path}".rstrip("/")
        self._parts = parts
        self._env = dict(os.environ if env is None else env)
        self._store: Any = None

    def __repr__(self) -> str:
        return f"ObjectTier({self.uri})"

    # -- building the store -------------------------------------------------------------
    def _build(self) -> Any:
        parts = self._parts
        if parts.scheme == "file":
            return LocalStore(Path(parts.path), mkdir=True)
        env = self._env
        config: dict[str, Any] = {
            "region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            "virtual_hosted_style_request": False,
        }
        endpoint = env.get("TIER_S3_ENDPOINT")
        if endpoint:
            config["endpoint"] = endpoint
        for name, key in (
            ("AWS_ACCESS_KEY_ID", "access_key_id"),
            ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
            ("AWS_SESSION_TOKEN", "token"),
        ):
            if env.get(name):
                config[key] = env[name]
        # An unreachable store fails a call within about a minute (connect 5 s, 3 retries in 30 s)
        # instead of obstore's 10 retries over 3 min: the offloader then backs off on its own
        # (storage_engine.tier.offload), and a read of offloaded data reports the failure.
        client: dict[str, Any] = {"connect_timeout": timedelta(seconds=5), "timeout": timedelta(seconds=60)}
        if endpoint and endpoint.startswith("http://"):
            client["allow_http"] = True
        retry: dict[str, Any] = {"max_retries": 3, "retry_timeout": timedelta(seconds=30)}
        prefix = parts.path.strip("/") or None
        try:
            return S3Store(
                parts.hostname,
                prefix=prefix,
                config=config,  # type: ignore[arg-type]
                client_options=client,  # type: ignore[arg-type]
                retry_config=retry,  # type: ignore[arg-type]
            )
        except (ObstoreError, ValueError) as exc:
            raise TierError(self.uri, "", "configure", _reason(exc)) from None

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = self._build()
        return self._store

    def _call(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (NotFoundError, FileNotFoundError):
            raise ObjectMissingError(self.uri, key, operation) from None
        except TierError:
            raise
        except (ObstoreError, OSError, ValueError, RuntimeError) as exc:
            raise TierError(self.uri, key, operation, _reason(exc)) from None

    # -- the interface --------------------------------------------------------------------
    def put(self, key: str, data: bytes | BinaryIO) -> None:
        """Write an object whole (atomic: readers see the old object or the new one)."""
        self._call("put", key, lambda: obstore.put(self.store, key, data))

    def put_parts(self, key: str, parts: Iterator[bytes], part_bytes: int) -> None:
        """Write an object from the pieces ``parts`` yields (any sizes) as a multipart upload whose
        parts are exactly ``part_bytes`` long but the last, wherever the pieces end (obstore buffers
        them; atomic as :meth:`put`): its S3 ETag is then the MD5 of those parts' MD5s,
        ``-<count>``, which the caller can check without reading the object back."""
        self._call("put", key, lambda: obstore.put(self.store, key, parts, chunk_size=part_bytes, use_multipart=True))

    def make_durable(self, *keys: str) -> None:
        """Make written objects survive a power loss before anything relies on them being the only copy.

        An S3 PUT is durable once acknowledged. A local directory's is not: ``obstore`` writes a staging
        file and renames it without ``fsync``, so after a crash of the machine the name could exist
        with its bytes lost. Here each file, then every directory from theirs up to the root (new ones
        hold new entries), once each however many of the files it holds, are fsynced."""
        if self.scheme != "file":
            return
        root = Path(self._parts.path)
        directories: dict[Path, None] = {}  # deepest first, in order, each once
        for key in keys:
            path = root / key
            self._call("sync", key, partial(_fsync, path, os.O_RDONLY))
            for directory in (path.parent, *path.parent.parents):
                directories[directory] = None
                if directory == root:
                    break
        for directory in directories:
            self._call("sync", str(directory), partial(_fsync, directory, os.O_RDONLY | os.O_DIRECTORY))

    @property
    def content_etags(self) -> bool:
        """Whether the store's ETags describe the content (S3: MD5-based); a local directory's do not."""
        return self.scheme == "s3"

    def get(self, key: str) -> bytes:
        """A whole (small) object: manifests."""
        return self._call("get", key, lambda: bytes(obstore.get(self.store, key).bytes()))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object (fewer when it ends sooner)."""
        if end <= start:
            return b""
        return self._call("get_range", key, lambda: bytes(obstore.get_range(self.store, key, start=start, end=end)))

    def head(self, key: str) -> ObjectInfo:
        meta = self._call("head", key, lambda: obstore.head(self.store, key))
        return ObjectInfo(key, int(meta["size"]), meta.get("e_tag"))

    def delete(self, key: str) -> bool:
        """Delete an object; whether it was there (deleting a missing object is not an error)."""
        try:
            self.head(key)
        except ObjectMissingError:
            return False
        try:
            self._call("delete", key, lambda: obstore.delete(self.store, key))
        except ObjectMissingError:
            return False
        return True

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with the directory ``prefix`` (``a/b/``), in key order."""

        def run() -> list[ObjectInfo]:
            found: list[ObjectInfo] = []
            for chunk in obstore.list(self.store, prefix=prefix.rstrip("/") or None):
                found.extend(ObjectInfo(str(m["path"]), int(m["size"]), m.get("e_tag")) for m in chunk)
            return sorted(found, key=lambda o: o.key)

        try:
            return self._call("list", prefix, run)
        except ObjectMissingError:  # a local directory not created yet
            return []

    def stream(self, key: str) -> Iterator[bytes]:
        """An object's bytes in chunks (read back for verification)."""
        result = self._call("get", key, lambda: obstore.get(self.store, key))
        try:
            for chunk in result.stream(min_chunk_size=READ_CHUNK):
                yield bytes(chunk)
        except (ObstoreError, OSError) as exc:
            raise TierError(self.uri, key, "get", _reason(exc)) from None

    def checksum(self, key: str, update: Callable[[Any], None]) -> int:
        """Feed an object's bytes as the store returns them now to ``update`` (a hash's), in ranged
        GETs of ``READ_CHUNK`` bytes (several times faster than a streamed GET, whose chunks are
        small, on a local directory); returns how many bytes there were."""
        size = self.head(key).size
        got = 0
        while got < size:
            end = min(size, got + READ_CHUNK)
            chunk = self._call("get_range", key, partial(obstore.get_range, self.store, key, start=got, end=end))
            if not len(chunk):
                break  # the object shrank meanwhile: the size returned says so
            update(chunk)
            got += len(chunk)
        return got

    def digest(
        self, key: str, algorithm: str = checksums.ALGORITHM, sink: Callable[[Any], object] | None = None
    ) -> tuple[int, str]:
        """``(size, hex digest)`` of an object as the store returns it now (:meth:`checksum`), hashed
        with ``algorithm`` (:mod:`storage_engine.tier.checksum`); each chunk also goes to ``sink`` when
        given (a recall writes the object to a local file as it checks it)."""
        digest = checksums.content_hash(algorithm)
        update = digest.update
        if sink is not None:

            def update(chunk: Any) -> None:
                digest.update(chunk)
                sink(chunk)

        size = self.checksum(key, update)
        return size, digest.hexdigest()


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
