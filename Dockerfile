# The steadyloop worker image: `steadyloop worker` against the Temporal server named in
# TEMPORAL_ADDRESS. Built by docker-compose.yml; usable on its own:
#   docker build -t steadyloop . && docker run -e TEMPORAL_ADDRESS=... -e OPENAI_API_KEY steadyloop
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Only what the package build reads (pyproject.toml names README.md as the readme).
COPY pyproject.toml README.md ./
COPY steadyloop ./steadyloop
# PYTHONDONTWRITEBYTECODE keeps the running worker from writing .pyc files, so they are
# made here, once, for everything installed: Temporal's sandbox re-imports the workflow
# module for every run, and without a .pyc that is a compile() of its source each time
# (8.6 ms of a run's 11.3 ms of imports, issue 19). pip compiles what it installs; the
# explicit pass covers the package and fails the build if a module does not compile.
RUN pip install . \
    && python -m compileall -q -j 0 "$(python -c 'import steadyloop, os; print(os.path.dirname(steadyloop.__file__))')" \
    && useradd --create-home --uid 10001 steadyloop

USER steadyloop
# Where the example tools read (sandbox) and write (outbox); mount volumes here to keep them.
ENV STEADYLOOP_SANDBOX_DIR=/home/steadyloop/sandbox \
    STEADYLOOP_OUTBOX_DIR=/home/steadyloop/outbox
# Created by this user, so a named volume mounted on them starts owned by it, not root.
RUN mkdir -p "$STEADYLOOP_SANDBOX_DIR" "$STEADYLOOP_OUTBOX_DIR"

# SIGTERM (what `docker stop` sends) starts the worker's graceful shutdown.
STOPSIGNAL SIGTERM
CMD ["steadyloop", "worker"]
