"""Object stores (``s3://``) as the package uses them: checked before any work, and emptied.

A run whose bucket is missing or whose credentials are refused must say so
at once, naming the path, the bucket and the endpoint, rather than after a
model has loaded or as a Beam job's traceback: ``check_object_stores`` asks
each bucket for one key, the cheapest request that both needs the
credentials and fails for a bucket that is not there (some S3 servers answer
``exists`` for any bucket name, so existence is not asked). Its messages
never hold the credentials, only the endpoint.

``delete_tree`` deletes a folder's objects in bulk, as S3's DeleteObjects
does, and one by one where a server does not implement that request with
the checksums current clients send (S3Proxy, some S3-compatible servers).
"""

from __future__ import annotations

import errno
import os

import fsspec

from beam_curator.stages.io.errors import CuratorInputError

_CREDENTIALS = ("credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or a profile), or "
                "storage_options key / secret")


def endpoint_of(fs: fsspec.AbstractFileSystem) -> str:
    """The endpoint an S3 filesystem talks to (its client's, once connected), else what configures it."""
    client = getattr(fs, "s3", None)
    configured = (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url")
    return (getattr(getattr(client, "meta", None), "endpoint_url", None) or configured
            or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3")


def _urls(value: str | list[str] | None) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def check_object_stores(paths: dict[str, str | list[str] | None]) -> None:
    """Each ``{parameter: URL or URLs}`` on S3 lies in a bucket that exists
    and that the credentials may list; a ``CuratorInputError`` naming the
    parameter, the URL, the bucket and the endpoint otherwise. Other paths
    pass unchecked. One request per bucket."""
    asked: set[tuple[int, str]] = set()
    for parameter, value in paths.items():
        for url in _urls(value):
            fs, path = fsspec.core.url_to_fs(url)
            if not hasattr(fs, "call_s3"):  # only s3fs: local folders and others are checked when opened
                continue
            bucket = path.split("/", 1)[0]
            if (id(fs), bucket) in asked:
                continue
            asked.add((id(fs), bucket))
            try:
                fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1)
            except FileNotFoundError:
                raise CuratorInputError(
                    f"{parameter} {url!r}: bucket {bucket!r} does not exist at {endpoint_of(fs)}; "
                    "create it or correct the path"
                ) from None
            except PermissionError as error:
                raise CuratorInputError(
                    f"{parameter} {url!r}: {endpoint_of(fs)} refused access to bucket {bucket!r} ({error}); "
                    f"check the {_CREDENTIALS}"
                ) from None


def delete_tree(fs: fsspec.AbstractFileSystem, path: str) -> None:
    """Delete ``path`` and everything below it: in bulk, or object by object
    where the server does not implement bulk deletion."""
    try:
        fs.rm(path, recursive=True)
    except OSError as error:
        if getattr(error, "errno", None) != errno.ENOSYS:
            raise
        for file in fs.find(path):
            fs.rm_file(file)
        fs.invalidate_cache(path)
