# One image for every process of the suite; compose.yaml runs each process as its
# own service with `serve NAME`. Build: docker build -t claude-gateway:local .
#
# Two stages. "build" makes a wheel of this repository and installs it, with the
# exact versions pyproject.toml pins, into a virtualenv at /opt/gateway. The final
# stage is a fresh python:3.11-slim that receives only that virtualenv: no
# sources, no wheel cache, no pip, and no compiler (the slim image ships none).
#
# Both stages start from python:3.11-slim pinned by its digest as well as its tag:
# a rebuild gets the same base image until the pin is changed here, on purpose.
# The tag says which image it is; the digest (of the multi-platform index) is what
# is pulled. The digest was not pulled or verified on the machine that pinned it
# (it had no registry access); refresh both FROM lines together with the digest that
#   docker buildx imagetools inspect python:3.11-slim
# prints as "Digest:". tests/unit/test_compose_consistency.py checks each FROM has both.

# ---- build stage -------------------------------------------------------------
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
# Only what the wheel is built from: pyproject.toml (metadata, pins, package list),
# README.md (the package's readme), constraints.txt (the tested versions) and the
# Python packages. Editing tests, docs or
# benchmarks does not invalidate the layers below.
COPY pyproject.toml README.md constraints.txt ./
COPY gateway ./gateway
COPY gateway_cli ./gateway_cli
COPY gateway_http ./gateway_http
COPY gateway_mcp ./gateway_mcp
COPY services ./services

# 1. Build the wheel of this repository (pip fetches setuptools, pyproject's
#    build-system requirement, into a throwaway build environment).
# 2. Create /opt/gateway as a virtualenv without pip of its own.
# 3. Install the wheel into it with the image's pip (--python targets the venv):
#    the runtime dependencies only (no test extras), every one of them, direct or
#    not, at the version constraints.txt gives (what the test suite ran with).
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/gateway \
    && python -m pip --python /opt/gateway/bin/python install -c constraints.txt /wheels/*.whl

# ---- final stage -------------------------------------------------------------
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# No .pyc files written at run time (pip compiled the venv's modules when it
# installed them, and /opt/gateway is not writable by the gateway user); logs
# reach `docker compose logs` unbuffered; the venv's `gateway` and `python` come
# first on PATH; the home is /data; every process listens on all interfaces of
# its container (compose publishes only the shim's port).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/gateway/bin:$PATH \
    GATEWAY_HOME=/data \
    GATEWAY_BIND_HOST=0.0.0.0

# The virtualenv from the build stage: the suite and its dependencies, nothing else.
# The base image's own pip, setuptools and wheel are removed: nothing is installed
# or built at run time.
COPY --from=build /opt/gateway /opt/gateway
RUN python -m pip uninstall --yes --quiet pip setuptools wheel

# A non-root system user, gateway (uid/gid 10001), owns the home. /data exists in
# the image with that owner, so a fresh named volume mounted there starts out
# writable by it.
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --home-dir /data --no-create-home --shell /usr/sbin/nologin gateway \
    && mkdir -p /data \
    && chown gateway:gateway /data
USER gateway
WORKDIR /data

# 50051 file API, 50052 watcher, 50053 kb, 50054 dreaming (gRPC), 10850 REST shim
# and MCP; 50061-50065 the metrics of each process (gateway.metrics).
EXPOSE 50051 50052 50053 50054 10850 50061 50062 50063 50064 50065

ENTRYPOINT ["gateway"]
# Default for a bare `docker run -p 10850:10850 -v gateway-home:/data IMAGE`: the
# whole suite in one container (`gateway up` supervises the five processes,
# writes the first config on an empty home and prints the admin key). A single
# `serve NAME` would be useless alone: it needs its peers and a home that `init`
# has written. compose.yaml overrides this with `init` and `serve NAME`.
CMD ["up"]
