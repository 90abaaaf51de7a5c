# Multi-stage build of the ride-status worker and the fleet simulator, and the deployment's set-up image.
# Pinned (issue 14): the Swift image by its release (the compiler the project is tested with), and the
# packages by deploy/swiftpm-pins.json (a Package.resolved, kept under another name so that the checkout's
# own stays untracked), which the build must follow exactly (`make lock` refreshes it).
FROM swift:6.3.1-bookworm AS builder
RUN apt-get update && apt-get install -y --no-install-recommends libmosquitto-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY Package.swift ./
COPY deploy/swiftpm-pins.json ./Package.resolved
RUN swift package resolve --force-resolved-versions
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --force-resolved-versions --product ride-status-worker \
 && swift build -c release --force-resolved-versions --product fleet-sim \
 && swift build -c release --force-resolved-versions --product ride-watch \
 && mkdir -p /staging \
 && cp .build/release/ride-status-worker .build/release/fleet-sim .build/release/ride-watch /staging/

# The `setup` service of docker-compose.yml: the CA, the certificates and the broker's accounts, made on the
# first start into the shared secrets volume, and the dynamic security plugin's file into the accounts volume,
# which the broker writes (scripts/deploy-setup.sh; openssl, no downloads).
FROM swift:6.3.1-bookworm-slim AS setup
RUN apt-get update && apt-get install -y --no-install-recommends openssl python3 python3-yaml mosquitto \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/ride-status
COPY scripts/deploy-setup.sh scripts/broker-security.py scripts/broker-accounts.py scripts/broker_roles.py ./scripts/
COPY config/security ./config/security
ENTRYPOINT ["scripts/deploy-setup.sh", "/secrets", "--accounts-file", "/accounts/dynamic-security.json", \
    "--broker-uid", "1883", "--client-uid", "10001"]

# tzdata: the IANA zones of the catalog's areas (E1's hours of the week); the worker refuses a zone it cannot find.
FROM swift:6.3.1-bookworm-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends libmosquitto1 ca-certificates curl libjs-leaflet tzdata \
 && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 --create-home worker
COPY --from=builder /staging/ /usr/local/bin/
COPY config/worker.yaml /etc/ride-status/worker.yaml
COPY config/ride-options.yaml /etc/ride-status/ride-options.yaml
# The live map and the OpenAPI document (http.webRoot; Leaflet comes from libjs-leaflet above).
COPY web /usr/share/ride-status/web
ENV RIDESTATUS_RIDE_OPTIONS_CATALOG=/etc/ride-status/ride-options.yaml RIDESTATUS_HTTP_WEB_ROOT=/usr/share/ride-status/web
USER worker
WORKDIR /home/worker
EXPOSE 9466
HEALTHCHECK --interval=10s --timeout=2s CMD curl -sf http://127.0.0.1:9466/healthz || exit 1
ENTRYPOINT ["ride-status-worker", "--config", "/etc/ride-status/worker.yaml"]
