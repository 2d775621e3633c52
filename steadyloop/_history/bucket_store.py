"""The object store on S3-compatible storage (AWS S3, SeaweedFS, MinIO, R2...).

`STEADYLOOP_BLOB_DIR=s3://bucket/prefix` (or the config file's `blob_dir`) selects it.
The endpoint, region and credentials come only from the standard AWS environment that
botocore reads (`AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_PROFILE` and `~/.aws/config`, SSO,
web identity, container and instance roles), never from steadyloop's settings or from
workflow history: a secret in a setting is printed, copied and committed; one in
history is readable by everyone who can read the run.

Client: `aiobotocore` (botocore on aiohttp). Chosen over `obstore` and `aioboto3`:
- async, so a worker keeps many chunk requests in flight on its event loop without a
  thread per request, on one pooled connection set per event loop (`max_pool_connections`);
- conditional puts: botocore sends `IfNoneMatch="*"` on PutObject, and the store answers
  412 PreconditionFailed when the key exists (checked against SeaweedFS);
- the whole AWS credential chain, profiles included: obstore's Rust client reads the
  `AWS_*` variables but not `~/.aws` profiles, which the issue names;
- it is what temporalio's own `S3StorageDriver` is built on (through aioboto3, a thin
  wrapper we do not need), so it is already what a Temporal user on AWS configures.

The obvious implementation is wrong in these ways, and this is what prevents each:

- *One client for the process*: an aiobotocore client is bound to the event loop that
  opened it, and the CLI, a test or a `Replayer` may run several loops one after
  another. A client is opened per running loop, on first use, and kept for that loop.
- *botocore's retries plus ours*: botocore's own retries are turned off
  (`total_max_attempts=1`) so `RetryingStore` alone decides, with one budget for every
  backend; this module only sorts errors: 5xx, 429, SlowDown/Throttling, timeouts and
  refused connections are `ObjectStoreUnavailable` (retried); 404 is "no such key";
  412 on a conditional put is "already there"; anything else (403, NoSuchBucket, no
  credentials) is `ObjectStoreError`, said once with the bucket and key.
- *An `http://` endpoint for a local store refused, or the bucket put in the host
  name*: path-style addressing is used, which every S3-compatible store serves.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from steadyloop._history.object_store import (
    ObjectInfo,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreUnavailable,
    check_key,
)

if TYPE_CHECKING:
    from types_aiobotocore_s3.client import S3Client

__all__ = ["S3Store", "parse_s3_url"]

_T = TypeVar("_T")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "ConditionalRequestConflict",  # two conditional writes at once: retry, then 412
        "OperationAborted",
    }
)


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`, else `ValueError` naming the URL."""
    parts = urlsplit(url)
    prefix = parts.path.strip("/")
    if parts.scheme != "s3" or parts.query or parts.fragment or not _BUCKET.match(parts.netloc):
        raise ValueError(
            f"blob store {url!r}: expected s3://bucket/prefix (a bucket name of 3 to 63 "
            "lower-case letters, digits, dots and hyphens) or a local directory"
        )
    if prefix:
        try:
            check_key(prefix)
        except ValueError:
            raise ValueError(
                f"blob store {url!r}: the prefix {prefix!r} is not a plain path"
            ) from None
    return parts.netloc, prefix


class S3Store(ObjectStore):
    """Objects at `s3://<bucket>/<prefix>/<key>`."""

    def __init__(self, bucket: str, prefix: str = "", *, max_connections: int = 32) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.max_connections = max_connections
        try:
            import aiobotocore  # noqa: F401 - imported where used; checked here, at setup
        except ImportError:
            raise ObjectStoreError(
                f"{self.description}: the S3 backend needs aiobotocore: "
                "pip install 'steadyloop[s3]'"
            ) from None
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[S3Client, AsyncExitStack]
        ] = weakref.WeakKeyDictionary()

    @classmethod
    def from_url(cls, url: str) -> S3Store:
        bucket, prefix = parse_s3_url(url)
        return cls(bucket, prefix)

    @property
    def description(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def locate(self, key: str) -> str:
        return f"object s3://{self.bucket}/{self._full(key)}"

    def _full(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    async def _client(self) -> S3Client:
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is not None:
            return found[0]
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        stack = AsyncExitStack()
        config = AioConfig(
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=self.max_connections,
            connect_timeout=5,
            read_timeout=30,
            s3={"addressing_style": "path"},
        )
        opened: Any = await stack.enter_async_context(
            get_session().create_client("s3", config=config)
        )
        client = cast("S3Client", opened)
        self._clients[loop] = (client, stack)
        return client

    async def _call(self, key: str, call: Callable[[S3Client], Awaitable[_T]]) -> _T:
        from aiohttp import ClientError as TransportError
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            HTTPClientError,
            NoCredentialsError,
        )

        try:
            return await call(await self._client())
        except ClientError as exc:
            raise self._sorted(exc, key) from None
        except NoCredentialsError:
            raise ObjectStoreError(
                f"{self.description}: no AWS credentials (set AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"
            ) from None
        except (TimeoutError, ConnectionError, HTTPClientError, TransportError, OSError) as exc:
            raise ObjectStoreUnavailable(f"{self.description}: {key}: {exc}") from None
        except BotoCoreError as exc:
            raise ObjectStoreError(f"{self.description}: {key}: {exc}") from None

    def _sorted(self, exc: Any, key: str) -> ObjectStoreError:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        said = f"{self.description}: {key}: {status or ''} {code} {error.get('Message', '')}"
        if status >= 500 or status == 429 or code in _TRANSIENT_CODES:
            return ObjectStoreUnavailable(said.strip())
        return ObjectStoreError(said.strip())

    @staticmethod
    def _status(exc: Any) -> tuple[int, str]:
        return (
            int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0),
            str(exc.response.get("Error", {}).get("Code", "")),
        )

    async def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        async def call(client: S3Client) -> bytes | None:
            try:
                response = await client.get_object(Bucket=self.bucket, Key=self._full(key))
            except ClientError as exc:
                status, code = self._status(exc)
                if status == 404 or code in ("NoSuchKey", "404"):
                    return None
                raise
            async with response["Body"] as body:
                return cast(bytes, await body.read())

        return await self._call(key, call)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        async def call(client: S3Client) -> bool:
            try:
                await client.put_object(
                    Bucket=self.bucket, Key=self._full(key), Body=data, IfNoneMatch="*"
                )
            except ClientError as exc:
                status, code = self._status(exc)
                if status == 412 or code == "PreconditionFailed":
                    return False
                raise
            return True

        return await self._call(key, call)

    async def put(self, key: str, data: bytes) -> None:
        async def call(client: S3Client) -> None:
            await client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data)

        await self._call(key, call)

    async def freshen(self, key: str) -> bool:
        """A server-side copy onto itself: S3 sets `LastModified` to now, no bytes move.
        (A copy onto itself is refused unless something changes: the metadata does.)"""
        from botocore.exceptions import ClientError

        async def call(client: S3Client) -> bool:
            full = self._full(key)
            try:
                await client.copy_object(
                    Bucket=self.bucket,
                    Key=full,
                    CopySource={"Bucket": self.bucket, "Key": full},
                    MetadataDirective="REPLACE",
                    Metadata={"steadyloop-freshened": "1"},
                )
            except ClientError as exc:
                status, code = self._status(exc)
                if status == 404 or code in ("NoSuchKey", "404"):
                    return False
                raise
            return True

        return await self._call(key, call)

    async def head(self, key: str) -> ObjectInfo | None:
        from botocore.exceptions import ClientError

        async def call(client: S3Client) -> ObjectInfo | None:
            try:
                found = await client.head_object(Bucket=self.bucket, Key=self._full(key))
            except ClientError as exc:
                if self._status(exc)[0] == 404:
                    return None
                raise
            return ObjectInfo(key, found["ContentLength"], _utc(found["LastModified"]))

        return await self._call(key, call)

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        root = f"{self.prefix}/" if self.prefix else ""
        token: str | None = None
        while True:

            async def call(client: S3Client, token: str | None = token) -> Any:
                arguments: dict[str, Any] = {"Bucket": self.bucket, "Prefix": root + prefix}
                if token:
                    arguments["ContinuationToken"] = token
                return await client.list_objects_v2(**arguments)

            page = await self._call(prefix or "(all keys)", call)
            for item in page.get("Contents", []):
                yield ObjectInfo(item["Key"][len(root) :], item["Size"], _utc(item["LastModified"]))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    async def delete(self, key: str) -> None:
        async def call(client: S3Client) -> None:
            await client.delete_object(Bucket=self.bucket, Key=self._full(key))

        await self._call(key, call)

    async def create_bucket(self) -> None:
        """Create the bucket (tests and first setup); one that exists is fine."""

        async def call(client: S3Client) -> None:
            await client.create_bucket(Bucket=self.bucket)

        try:
            await self._call("(bucket)", call)
        except ObjectStoreError as exc:
            if "BucketAlreadyOwnedByYou" not in str(exc) and "BucketAlreadyExists" not in str(exc):
                raise

    async def aclose(self) -> None:
        found = self._clients.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found[1].aclose()


def _utc(when: datetime) -> datetime:
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
