"""docker-compose.yml and the Dockerfile, checked for structure: Docker has no engine on
these machines, so the deployment cannot be started here. What is checked is what would
make `docker compose up` fail or misbehave: a dependency on a service that is not there
or cannot become healthy, a worker pointed at the wrong address, a key written into the
file, an image that does not install or start the worker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.testing import WorkflowEnvironment

from steadyloop._chains.queries import CHAIN_SEARCH_ATTRIBUTES
from steadyloop._temporal_binaries import dev_server_path
from steadyloop._worker.process import DEFAULT_GRACEFUL_SHUTDOWN

ROOT = Path(__file__).resolve().parent.parent
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


def resolved(value: str) -> str:
    """`${NAME:-default}` replaced by its default, as compose does with NAME unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def environment(service: str) -> dict[str, str | None]:
    """A service's environment, list or mapping form; None means passed through by name."""
    raw = SERVICES[service].get("environment", {})
    if isinstance(raw, dict):
        return {k: None if v is None else resolved(str(v)) for k, v in raw.items()}
    out: dict[str, str | None] = {}
    for item in raw:
        name, equals, value = str(item).partition("=")
        out[name] = resolved(value) if equals else None
    return out


def depends_on(service: str) -> dict[str, str]:
    raw = SERVICES[service].get("depends_on", {})
    if isinstance(raw, list):
        return dict.fromkeys(raw, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in raw.items()}


def published(service: str) -> dict[int, str]:
    """Container port -> the host address it is published on."""
    out: dict[int, str] = {}
    for port in SERVICES[service].get("ports", []):
        *host, container = str(port).split(":")
        out[int(container)] = ":".join(host)
    return out


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_deployment_has_its_services() -> None:
    assert set(SERVICES) == {
        "postgresql",
        "temporal-schema",
        "temporal",
        "temporal-namespace",
        "temporal-ui",
        "worker",
    }


@pytest.mark.parametrize(
    ("service", "image"),
    [
        ("postgresql", "postgres"),
        ("temporal-schema", "temporalio/admin-tools"),
        ("temporal", "temporalio/server"),
        ("temporal-namespace", "temporalio/admin-tools"),
        ("temporal-ui", "temporalio/ui"),
    ],
)
def test_images_are_the_current_ones_and_pinned(service: str, image: str) -> None:
    name, _, tag = resolved(SERVICES[service]["image"]).partition(":")
    assert name == image
    assert re.fullmatch(r"\d+(\.\d+)*", tag), f"{service} is not pinned to a version: {tag!r}"


def test_dependencies_exist_can_be_met_and_have_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for service in SERVICES:
        needs = depends_on(service)
        graph[service] = set(needs)
        for target, condition in needs.items():
            assert target in SERVICES, f"{service} depends on unknown {target}"
            assert condition in CONDITIONS
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[target], f"{target} can never be healthy"
            if condition == "service_completed_successfully":
                # A one-shot job: restarted only on failure, so it can complete.
                assert str(SERVICES[target].get("restart", "no")).startswith(("no", "on-failure"))
    order = list(TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert order.index("temporal-schema") < order.index("temporal") < order.index("worker")


def test_temporal_persists_to_the_postgresql_service() -> None:
    env = environment("temporal")
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] in SERVICES
    assert env["POSTGRES_PWD"] == environment("postgresql")["POSTGRES_PASSWORD"]
    assert environment("temporal-schema")["SQL_PASSWORD"] == env["POSTGRES_PWD"]
    volumes = SERVICES["postgresql"]["volumes"]
    assert any(str(v).endswith(":/var/lib/postgresql/data") for v in volumes)
    assert any(str(v).split(":")[0] in COMPOSE["volumes"] for v in volumes)


def test_ports_publish_the_frontend_and_the_ui_on_loopback_only() -> None:
    assert published("temporal") == {7233: "127.0.0.1:7233"}
    assert published("temporal-ui") == {8080: "127.0.0.1:8080"}
    assert published("postgresql") == {}
    assert published("worker") == {}


def test_the_ui_and_the_worker_reach_temporal_by_its_service_name() -> None:
    for service in ("temporal-ui", "worker", "temporal-namespace"):
        host, _, port = str(environment(service)["TEMPORAL_ADDRESS"]).partition(":")
        assert host in SERVICES and SERVICES[host]["image"].startswith("temporalio/server")
        assert int(port) in published(host)


def test_the_worker_is_built_here_and_configured_from_the_shell_without_keys() -> None:
    worker = SERVICES["worker"]
    assert worker["build"]["context"] == "."
    assert (ROOT / worker["build"]["context"] / worker["build"]["dockerfile"]).is_file()
    assert worker["command"] == ["steadyloop", "worker"]
    assert depends_on("worker") == {
        "temporal": "service_healthy",
        "temporal-namespace": "service_completed_successfully",
    }
    env = environment("worker")
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert env["TEMPORAL_NAMESPACE"] == environment("temporal-namespace")["NAMESPACE"]
    assert env["STEADYLOOP_TASK_QUEUE"] == "steadyloop"
    # Passed through by name: the file holds no value for them, so no key can be in it.
    for passed in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "STEADYLOOP_ENDPOINTS"):
        assert env[passed] is None
    assert not re.search(r"sk-[A-Za-z0-9]", (ROOT / "docker-compose.yml").read_text())


def test_docker_waits_longer_than_the_worker_drains() -> None:
    grace = re.fullmatch(r"(\d+)s", SERVICES["worker"]["stop_grace_period"])
    assert grace
    assert int(grace.group(1)) > DEFAULT_GRACEFUL_SHUTDOWN.total_seconds()
    assert SERVICES["worker"]["init"] is True  # a real PID 1 forwards SIGTERM


def test_the_dockerfile_installs_the_package_and_runs_the_worker_unprivileged() -> None:
    instructions = dockerfile_instructions()
    kinds = [kind for kind, _ in instructions]
    base = dict(instructions)["FROM"]
    version = re.match(r"python:(\d+)\.(\d+)", base)
    assert version, base
    minimum = re.search(r"(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert minimum
    assert (int(version[1]), int(version[2])) >= (int(minimum[1]), int(minimum[2]))

    copied = " ".join(args for kind, args in instructions if kind == "COPY")
    for needed in ("pyproject.toml", PYPROJECT["project"]["readme"], "steadyloop"):
        assert needed in copied.split(), f"the package build needs {needed}"
    runs = [args for kind, args in instructions if kind == "RUN"]
    install = next(
        i for i, (k, a) in enumerate(instructions) if k == "RUN" and "pip install ." in a
    )
    assert any("pip install ." in run for run in runs)
    assert kinds.index("COPY") < install

    user = [args for kind, args in instructions if kind == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert json.loads(dict(instructions)["CMD"]) == ["steadyloop", "worker"]

    env = " ".join(args for kind, args in instructions if kind == "ENV")
    outbox = re.search(r"STEADYLOOP_OUTBOX_DIR=(\S+)", env)
    assert outbox
    assert f"steadyloop-outbox:{outbox.group(1)}" in SERVICES["worker"]["volumes"]


def test_the_command_the_image_runs_is_the_console_script_the_package_declares() -> None:
    scripts = PYPROJECT["project"].get("scripts", {})
    assert scripts.get("steadyloop") == "steadyloop._cli.main:main"


def test_the_build_context_leaves_out_local_state() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git"} <= set(ignored)


def registered_search_attributes() -> dict[str, str]:
    spec = str(environment("temporal-namespace")["SEARCH_ATTRIBUTES"])
    return dict(item.split("=", 1) for item in spec.split())


def test_the_namespace_job_registers_exactly_the_chain_search_attributes() -> None:
    # A delegating run sets these; a cluster without them fails its workflow task forever.
    assert registered_search_attributes() == CHAIN_SEARCH_ATTRIBUTES


@pytest.mark.slow
async def test_the_namespace_job_registers_them_on_a_real_server_and_can_run_again() -> None:
    """The job's shell script, run with the `temporal` CLI against a dev server started
    without the attributes: all six exist afterwards with their types, and a second run
    (every `docker compose up`) succeeds without changing anything."""
    script = SERVICES["temporal-namespace"]["command"][0].replace("$$", "$")
    cli = dev_server_path()
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=cli, ui=False)
    async with env:
        shell_env = {
            **os.environ,
            "PATH": f"{Path(cli).parent}:{os.environ.get('PATH', '')}",
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "NAMESPACE": "default",
            "SEARCH_ATTRIBUTES": str(environment("temporal-namespace")["SEARCH_ATTRIBUTES"]),
        }
        for _ in range(2):
            done = subprocess.run(
                ["/bin/sh", "-ec", script], env=shell_env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr
        listed = await env.client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
    kinds = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
    kinds["Int"] = IndexedValueType.INDEXED_VALUE_TYPE_INT
    for name, kind in CHAIN_SEARCH_ATTRIBUTES.items():
        assert listed.custom_attributes.get(name) == kinds[kind], name


def test_the_temporal_service_reads_the_dynamic_config_the_dev_server_gets() -> None:
    """A real cluster hands tasks out without the per-shard 20-a-second wait,
    with the value the embedded dev server is started with. The file the server is told
    to read is the one compose mounts, and it holds that value."""
    from steadyloop._temporal_binaries import DEV_SERVER_DYNAMIC_CONFIG

    path = environment("temporal")["DYNAMIC_CONFIG_FILE_PATH"]
    mounts = {m["target"]: m["source"] for m in SERVICES["temporal"]["configs"]}
    assert path in mounts
    config = yaml.safe_load(COMPOSE["configs"][mounts[path]]["content"])
    for key, value in DEV_SERVER_DYNAMIC_CONFIG.items():
        assert [str(entry["value"]) for entry in config[key]] == [value]


def test_the_image_byte_compiles_what_the_sandbox_re_imports_every_run() -> None:
    """The image sets PYTHONDONTWRITEBYTECODE, so the running worker never
    writes a .pyc; without one made at build time, Temporal's sandbox compiles the
    workflow module's source for every run. The build compiles the installed package
    after installing it, and the directory it names is the package's."""
    instructions = dockerfile_instructions()
    env = " ".join(args for kind, args in instructions if kind == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    runs = [args for kind, args in instructions if kind == "RUN"]
    install = next(run for run in runs if "pip install ." in run)
    assert "-m compileall" in install.split("pip install .", 1)[1]
    where = re.search(r"-c '([^']+)'", install)
    assert where is not None
    found = subprocess.run(
        [sys.executable, "-c", where.group(1)], capture_output=True, text=True, check=True
    ).stdout.strip()
    import steadyloop

    assert Path(found) == Path(steadyloop.__file__).parent
