"""How the web surface names a tenant's threads, apart from the web server itself.

A tenant's thread `T` is the client thread `web/<tenant>/T`; the id a request carries is
`T~<tag>`, the tag a hash of the tenant and the name, so another tenant's request names
nothing it can reach. Pure (hashlib only): a workflow that starts an agent in a tenant's
space (`steadyloop.workflow.Agent(tenant=...)`) names the thread the same way.
"""

from __future__ import annotations

import hashlib

THREAD_PREFIX = "web"
TAG_CHARS = 12


def thread_tag(tenant: str, name: str) -> str:
    """The tag that binds thread `name` to `tenant` in a request's thread id."""
    return hashlib.sha256(f"{tenant}\0{name}".encode()).hexdigest()[:TAG_CHARS]


def client_thread(tenant: str, name: str) -> str:
    """The client thread behind the tenant's web thread `name`."""
    return f"{THREAD_PREFIX}/{tenant}/{name}"


def web_thread_id(tenant: str, name: str) -> str:
    """The id the tenant's requests (and the page's address) give thread `name`."""
    return f"{name}~{thread_tag(tenant, name)}"
