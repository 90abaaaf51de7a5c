# Multi-stage build of the ride-status worker and the fleet simulator.
FROM swift:6.1-bookworm AS builder
RUN apt-get update && apt-get install -y --no-install-recommends libmosquitto-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product ride-status-worker \
 && swift build -c release --product fleet-sim \
 && swift build -c release --product ride-watch \
 && mkdir -p /staging \
 && cp .build/release/ride-status-worker .build/release/fleet-sim .build/release/ride-watch /staging/

FROM swift:6.1-bookworm-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends libmosquitto1 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* && useradd --system --create-home worker
COPY --from=builder /staging/ /usr/local/bin/
COPY config/worker.yaml /etc/ride-status/worker.yaml
COPY config/ride-options.yaml /etc/ride-status/ride-options.yaml
ENV RIDESTATUS_RIDE_OPTIONS_CATALOG=/etc/ride-status/ride-options.yaml
USER worker
WORKDIR /home/worker
EXPOSE 9466
HEALTHCHECK --interval=10s --timeout=2s CMD curl -sf http://127.0.0.1:9466/healthz || exit 1
ENTRYPOINT ["ride-status-worker", "--config", "/etc/ride-status/worker.yaml"]
