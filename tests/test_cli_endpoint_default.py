"""A run that names no endpoint asks the one its worker serves.

`steadyloop worker --endpoint scripted=...` then `steadyloop run "..."` is not refused
("endpoint 'default' is not one the serving worker knows"): the worker's configuration is
the run's default, so a worker with one endpoint answers for it. With several, the run
still has to say which (the refusal lists them).
"""

from __future__ import annotations

from steadyloop._cli.run_command import only_served_endpoint
from steadyloop._serving import ServedEndpoint, WorkerDescription


def described(*names: str) -> WorkerDescription:
    return WorkerDescription(endpoints=[ServedEndpoint(name=n, model="m") for n in names])


def test_the_only_endpoint_a_worker_serves_is_the_runs() -> None:
    assert only_served_endpoint("default", described("scripted")) == "scripted"


def test_a_served_default_stays_the_default() -> None:
    assert only_served_endpoint("default", described("default", "other")) == "default"
    assert only_served_endpoint("default", described("default")) == "default"


def test_with_several_and_no_default_the_run_must_choose() -> None:
    # Left as asked, so `_check_served_endpoint` refuses it and lists the choices.
    assert only_served_endpoint("default", described("a", "b")) == "default"
