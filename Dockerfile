# One image for every process of the suite; compose.yaml picks the process with
# `serve NAME`. Build: docker build -t claude-gateway:local .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    GATEWAY_HOME=/data \
    GATEWAY_BIND_HOST=0.0.0.0

WORKDIR /src
COPY . .
# The runtime dependencies only (no test extras); exact pins come from pyproject.toml.
RUN pip install --no-cache-dir . \
    && rm -rf build ./*.egg-info

# A non-root user owns the home. /data exists in the image with that owner, so a
# fresh named volume mounted there starts out writable by it.
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --home-dir /data --no-create-home --shell /usr/sbin/nologin gateway \
    && mkdir -p /data \
    && chown gateway:gateway /data
USER gateway
WORKDIR /data

# 50051 file API, 50052 watcher, 50053 kb, 50054 dreaming (gRPC), 10850 REST shim.
EXPOSE 50051 50052 50053 50054 10850

ENTRYPOINT ["gateway"]
# Default: the whole suite in one container. compose.yaml runs one process per service instead.
CMD ["up"]
