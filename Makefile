# The two commands a new user needs: `make run` and `make test`. Everything else is for developers.
SHELL := /bin/bash
SWIFT ?= swift
STRICT_FLAGS := $(if $(filter true,$(CI)),-Xswiftc -warnings-as-errors,)
RELEASE_BIN := .build/release
BROKER_PORT ?= 8883
RIDES ?= 50
VEHICLES ?= 50
DRIVING ?= classes
METRICS_PORT ?= 9466
KEEP ?= 0
OSRM_PORT ?= 5005
STREETS ?= 1

.PHONY: all deps build build-release build-unbuffered run run-cluster lock reset fuzz chaos bench-flood test test-browser test-api test-ops test-routes test-routes-made-up test-push test-security test-pause test-cuts test-tsan test-cluster test-starts test-accounts lint format bench bench-client bench-domain bench-subscribe bench-quotes bench-e2e bench-scale bench-eta bench-eta-rhythm bench-eta-restart bench-live-map bench-instructions bench-group bench-push clean

all: build

## deps: install missing Debian packages (mosquitto, libmosquitto-dev, ...), with apt-get update first
deps:
	@./scripts/install-deps.sh

build: deps
	$(SWIFT) build

build-release: deps
	$(SWIFT) build -c release --product ride-status-worker
	$(SWIFT) build -c release --product fleet-sim
	$(SWIFT) build -c release --product ride-watch
	$(SWIFT) build -c release --product ride-push

## run: the main job: local mosquitto, the worker, the fleet simulator and the live view (Ctrl-C stops all), the
## cars on central Helsinki's streets along a routing engine's routes (scripts/roads.sh prepares OSRM and the
## extract once, in seconds; STREETS=0 drives made-up roads around Berlin)
## (KEEP=1 keeps the rides of the previous run; BROKER_PORT, METRICS_PORT, OSRM_PORT, VEHICLES and DRIVING change the
## defaults; DRIVING=grid drives the old grid city instead of the classes of real driving). It runs debug
## builds of what it starts, the ones `make test` leaves: 50 cars need no optimiser, and a first debug build of
## these four takes minutes where release builds took 18 (RELEASE=1 runs release builds, for many more cars)
RUN_PRODUCTS := ride-status-worker fleet-sim ride-watch ride-push
run: deps
	@echo "==> building $(RUN_PRODUCTS) ($(if $(RELEASE),release,debug)); a first build on 2 cores takes a few minutes"
	@set -e; for product in $(RUN_PRODUCTS); do $(SWIFT) build $(if $(RELEASE),-c release,) --product $$product; done
	@BIN_DIR="$$($(SWIFT) build $(if $(RELEASE),-c release,) --show-bin-path)" BROKER_PORT=$(BROKER_PORT) \
		METRICS_PORT=$(METRICS_PORT) VEHICLES=$(VEHICLES) DRIVING=$(DRIVING) KEEP=$(KEEP) \
		OSRM_PORT=$(OSRM_PORT) STREETS=$(STREETS) ./scripts/run-local.sh

## run-cluster: a group on a clustered broker with etcd (G6), on loopback: three etcd members, a 3-node NATS cluster
## (MQTT 3.1.1), three workers, fleet-sim and the live view (debug builds; Ctrl-C stops all; docs/operations.md)
run-cluster: deps
	@./scripts/nats-server.sh --install
	@set -e; for product in ride-status-worker fleet-sim ride-watch; do $(SWIFT) build --product $$product; done
	@BIN_DIR="$$($(SWIFT) build --show-bin-path)" VEHICLES=$(if $(filter 50,$(VEHICLES)),30,$(VEHICLES)) \
		./scripts/run-cluster.sh

## lock: pin the packages the Docker build uses (deploy/swiftpm-pins.json) to what this checkout resolves
lock:
	$(SWIFT) package resolve
	cp Package.resolved deploy/swiftpm-pins.json

## reset: forget every local ride, session and log under var/ (the build stays)
reset:
	@if [ -d var/run ] && ls var/run/*.pid >/dev/null 2>&1; then \
		echo "stopping what an earlier make run left running"; \
		for f in var/run/*.pid; do kill -TERM "$$(cat $$f)" 2>/dev/null || true; done; sleep 1; fi
	rm -rf var

## test: install, build and run the whole test suite against real mosquitto brokers (the NATS cluster suites
## run in make test-cluster: each starts three nats-server processes, which next to the rest of the suite in
## parallel on 2 cores lost a node's failover deadline and reordered statuses across publishers; the etcd suites,
## G6, run after the rest, alone: three etcd members and three workers beside the in-memory tests starved their
## 30 s deadlines)
test: deps
	$(SWIFT) build --build-tests $(STRICT_FLAGS)
	$(SWIFT) test --skip-build --skip NATSClusterTests --skip "EtcdGatewayTests|GroupEtcdTests|CutEndToEndTests"
	$(SWIFT) test --skip-build --filter "EtcdGatewayTests|GroupEtcdTests"
	CUT_CASES=etcd,broker $(SWIFT) test --skip-build --filter CutEndToEndTests
	@$(MAKE) --no-print-directory test-browser test-api test-ops test-push test-security test-routes build-unbuffered SKIP_BUILD=1

## build-unbuffered: the MQTT client without its read buffer under libmosquitto (the package trait UnbufferedIO,
## the path every platform but Linux with glibc takes), in its own build folder; about a minute
build-unbuffered: deps
	$(SWIFT) build --target MQTTClient --traits UnbufferedIO --scratch-path .build-unbuffered $(STRICT_FLAGS)

## test-browser: the live map in headless chromium (Selenium) against mosquitto, the worker and fleet-sim
## (debug builds); a screenshot goes to .build/test-output/browser
test-browser: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	@./scripts/roads.sh --install
	python3 Tests/Python/browser/test_map.py --bin-dir "$$($(SWIFT) build --show-bin-path)"

## test-routes: E2 end to end on real streets: mosquitto, the worker, fleet-sim and the real routing engine (osrm-routed
## on the Helsinki extract); statuses name their source before and after the pickup, no route is dead-lettered, every
## route is the engine's and every car drives on a street (about a minute). test-routes-made-up: the same checks of
## E2 with STREETS=0's made-up roads (a minute and a half; not in make test: StreetsTests checks those routes alone)
test-routes: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	@./scripts/roads.sh --install
	python3 Tests/Python/routes/test_routes.py --streets --bin-dir "$$($(SWIFT) build --show-bin-path)"

test-routes-made-up: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	python3 Tests/Python/routes/test_routes.py --bin-dir "$$($(SWIFT) build --show-bin-path)"

## test-ops: promtool over the alert rules (and their unit tests) and a real scrape; the dashboard's metrics exist
test-ops: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	python3 Tests/Python/ops/test_ops.py --bin-dir "$$($(SWIFT) build --show-bin-path)"

## test-push: ride-push (issue 32) end to end: the APNs and FCM stand-ins checked against aioapns, then mosquitto,
## the worker, fleet-sim, ride-push and the stand-ins through a ride's life, an APNs outage and a 410
test-push: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	python3 Tests/Python/push/test_standins.py
	python3 Tests/Python/push/test_push.py --bin-dir "$$($(SWIFT) build --show-bin-path)"

## test-security: attacks on make run's deployment as shipped (TLS, dynamic security, ACL) with the real worker, ride-push
## and broker: sessions taken by client id, rebinding hosts, spoofed and forged messages, share tokens, paths (A4, A1,
## A3); each names the refusal it expects, and the worker must keep its connection and its rides their cadence.
## ATTACK_SECONDS (default 20) for a longer window
test-security: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	python3 Tests/Python/security/test_security.py --bin-dir "$$($(SWIFT) build --show-bin-path)" --seconds $(or $(ATTACK_SECONDS),20)

## test-api: schemathesis over web/openapi.json against a running worker with rides (mosquitto, fleet-sim)
test-api: deps
	$(if $(SKIP_BUILD),,$(SWIFT) build $(STRICT_FLAGS))
	python3 Tests/Python/api/test_api.py --bin-dir "$$($(SWIFT) build --show-bin-path)"

## test-cluster: the real 3-node NATS cluster suites (MQTT 3.1.1) on the pinned nats-server (scripts/nats-server.sh),
## one process each, one after the other; RUNS=10 repeats them and stops at the first failure. The partition suite
## on NATS with etcd runs the cuts CUT_CASES names (broker, etcd, both; default all), CUT_RUNS times each
RUNS ?= 1
CUT_CASES ?=
test-cluster: deps
	$(SWIFT) build --build-tests $(STRICT_FLAGS)
	@nats="$$(./scripts/nats-server.sh)" && echo "==> $$("$$nats" --version) at $$nats" && \
	for run in $$(seq 1 $(RUNS)); do \
		echo "==> cluster suites: run $$run of $(RUNS)"; \
		NATS_SERVER="$$nats" $(SWIFT) test --skip-build --filter "MQTTClientTests.NATSClusterTests" || exit 1; \
		NATS_SERVER="$$nats" $(SWIFT) test --skip-build --filter GroupNATSClusterTests || exit 1; \
		NATS_SERVER="$$nats" CUT_CASES="$(CUT_CASES)" $(SWIFT) test --skip-build --filter CutNATSClusterTests || exit 1; \
		echo "==> cluster suites: $$run of $(RUNS) runs passed in a row"; \
	done

## test-pause: the pause suite (G5, C5) repeated: SIGSTOP past the will and shorter than the lease, PAUSE_RUNS (default
## 20) runs of each on one mosquitto with three workers; prints each run's counts. PAUSE_LEASE=off runs the workers
## without the lease, to measure what it prevents (the checks then fail). make test runs each case once
PAUSE_RUNS ?= 20
test-pause: deps
	$(SWIFT) build --build-tests $(STRICT_FLAGS)
	PAUSE_RUNS=$(PAUSE_RUNS) PAUSE_LEASE=$(PAUSE_LEASE) $(SWIFT) test --skip-build --filter PauseEndToEndTests

## test-cuts: the partition suite (G5, G6, G3, C5) repeated: one of three etcd-granted workers cut off from the broker,
## from etcd, or from both (through relays it reaches them by) for 12 s (etcd) or 20 s (the broker, both: past the
## new holders' wait for its will), CUT_RUNS (default 20) runs of each (CUT_CASES chooses); prints each run's counts.
## make test runs the etcd and the broker cut once
CUT_RUNS ?= 20
test-cuts: deps
	$(SWIFT) build --build-tests $(STRICT_FLAGS)
	CUT_RUNS=$(CUT_RUNS) $(SWIFT) test --skip-build --filter CutEndToEndTests

## test-starts: 100 fresh worker starts beside a CPU hog on each core, each met by a booking published the instant
## the worker's online arrives (L8, L6); prints how many got a status. Not in CI (a few minutes); STARTS to change
test-starts: deps
	$(SWIFT) build --build-tests $(STRICT_FLAGS)
	READINESS_STARTS=$(or $(STARTS),100) READINESS_HOG=1 $(SWIFT) test --skip-build --filter ReadinessEndToEndTests

## test-accounts: rider accounts created and removed on a running mosquitto through its dynamic security plugin
## (issue 30), each checked for isolation by reason codes; 100 in make test, RIDERS (default 1000) here
test-accounts: deps
	$(SWIFT) build --build-tests $(STRICT_FLAGS)
	ACCOUNTS_RIDERS=$(or $(RIDERS),1000) $(SWIFT) test --skip-build --filter DynamicSecurityTests

## test-tsan: the MQTT client, the lifecycle and the in-memory service and group tests under ThreadSanitizer (separate build folder)
test-tsan: deps
	TSAN_OPTIONS="suppressions=$(CURDIR)/scripts/tsan-suppressions.txt" $(SWIFT) test --scratch-path .build-tsan --sanitize=thread \
		--filter "MQTTClientTests|ServiceInMemoryTests|GroupInMemoryTests|WorkerLifecycleTests|SubscriptionQueueTests" --skip NATSClusterTests

## chaos: faults against the release worker and a real mosquitto (kills, broker restarts, a freeze, a cut);
## prints its counts and fails unless all are 0. CHAOS_ARGS for more (ride-bench chaos --help)
## FAULT_CONFIG=debug runs chaos and bench-flood on make test's debug build instead (CI does: they check faults and
## bounds, not speed, and a clean clone's release build took 8 of CI's 35 minutes)
FAULT_CONFIG ?= release
FAULT_FLAGS := $(if $(filter debug,$(FAULT_CONFIG)),$(STRICT_FLAGS),)
chaos: deps
	$(SWIFT) build -c $(FAULT_CONFIG) --product ride-status-worker $(FAULT_FLAGS)
	$(SWIFT) build -c $(FAULT_CONFIG) --product ride-bench $(FAULT_FLAGS)
	.build/$(FAULT_CONFIG)/ride-bench chaos $(CHAOS_ARGS)

## bench-flood: 200,000 garbage messages on vehicle and control topics: memory, healthy cadence, dead-letter limit
bench-flood: deps
	$(SWIFT) build -c $(FAULT_CONFIG) --product ride-status-worker $(FAULT_FLAGS)
	$(SWIFT) build -c $(FAULT_CONFIG) --product ride-bench $(FAULT_FLAGS)
	.build/$(FAULT_CONFIG)/ride-bench flood $(FLOOD_ARGS)

## model-check: the lease and grant rules (G5, G6, C5) in Spin, models/lease.pml; each configuration must reach its
## stated verdict, safe or violated (docs/model-check.md). About 2 minutes; MODEL=full for every configuration
## (about 15 minutes, up to 6 GB of memory at a time)
model-check:
	@command -v spin >/dev/null && command -v gcc >/dev/null || ./scripts/install-deps.sh
	./scripts/model-check.sh $(or $(MODEL),quick)

## fuzz: libFuzzer + AddressSanitizer on every decoder of the domain, FUZZ_SECONDS per target (default 60)
FUZZ_SECONDS ?= 60
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh

lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Fuzz Benchmarks/Benchmarks Benchmarks/Package.swift

format:
	$(SWIFT) format format --in-place --recursive Sources Tests Fuzz Benchmarks/Benchmarks Benchmarks/Package.swift

## bench: client throughput against mosquitto_sub, and the domain benchmarks (release builds)
bench: bench-client bench-domain bench-subscribe bench-quotes bench-e2e

bench-client: deps
	$(SWIFT) build -c release --product ride-bench
	@./scripts/bench-client.sh

## bench-domain: the domain's hot paths under ordo-one/benchmark (percentiles, mallocs per operation, its own
## package in Benchmarks/), then memory per active ride in a plain process (ride-bench memory)
bench-domain: deps
	cd Benchmarks && $(SWIFT) package --allow-writing-to-package-directory benchmark
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench memory

## bench-subscribe: 20,000 vehicle subscriptions one at a time against one batch, each on a fresh mosquitto
bench-subscribe: deps
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench subscribe

## bench-push: ride-push under a fleet's statuses through a 60 s APNs outage (issue 32): memory, what waits, tries,
## and the recovery, against a naive queue and one push per activity; PUSH_ARGS (--vehicles, --outage) to change
bench-push: deps
	$(SWIFT) build -c release --product ride-status-worker
	$(SWIFT) build -c release --product fleet-sim
	$(SWIFT) build -c release --product ride-push
	python3 Tests/Python/push/bench_push.py --bin-dir .build/release $(PUSH_ARGS)

## bench-group: a group of release workers on mosquitto (issues 13, 28): 30,000 rides with a fix per vehicle every 10 s,
## one worker then three (rides moved per join, the cost of membership against one worker), then SIGKILL and SIGTERM;
## per handover: time until every moved ride publishes again, largest gap, statuses without a location, state writes;
## GROUP_ARGS=--etcd runs the same with ownership granted by three etcd members on loopback (G6)
bench-group: deps
	$(SWIFT) build -c release --product ride-bench
	$(SWIFT) build -c release --product ride-status-worker
	.build/release/ride-bench group $(GROUP_ARGS)

## bench-e2e: load harness: the release worker and a bare mosquitto_sub under rising fix rates, then 10,000 rides
bench-e2e: deps
	$(SWIFT) build -c release --product ride-bench
	$(SWIFT) build -c release --product ride-status-worker
	.build/release/ride-bench e2e $(E2E_ARGS)

## bench-scale: one worker at fleet scale (issue 12): 100,000 cadence rides (intake, largest gap, memory, CPU,
## broker messages per status), a drain of 150,000 queued fixes against a bare mosquitto_sub, then the broker
## frozen for 60 s (memory during it, time to republish every ride). About 5 minutes; SCALE_ARGS to change
bench-scale: deps
	$(SWIFT) build -c release --product ride-bench
	$(SWIFT) build -c release --product ride-status-worker
	.build/release/ride-bench e2e --rates 2000 --step-seconds 2 --probes 10 --cadence-rides 100000 \
		--cadence-seconds 60 --freeze-seconds 60 $(SCALE_ARGS)

## bench-eta: ETA error by horizon and class of trip (issues 15, 31): arterial, urban and mixed trips calibrated to
## 22 recorded city trips, and the old grid city, replayed through the ride domain; the worker beside naive, the
## oracle, ideal E1, the oracle blind to stops and the road alone, with issue 31's targets; then Porto's 240 recorded
## fares with no route, the route, and the route with an engine's duration (E2), cold and warm, with issue 50's
## targets. ETA_ARGS: --classes, --trips, --trips-folder DIR. A few seconds.
bench-eta: deps
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench eta --porto Tests/Data/porto-taxi/trips.csv $(ETA_ARGS)

## bench-eta-rhythm: the same classes over four weeks, 1,500 trips each, driven slower at rush hour; each class
## replayed with and without the areas' hours of the week (rides.hoursOfWeek). About half a minute.
bench-eta-rhythm: deps
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench eta --weeks 4 --trips 1500 $(ETA_ARGS)

## bench-eta-restart: the range after a restart: each class's worker restarts after 100 trips, reading back the
## priors it shared with their ranges and without them, beside one that keeps running; coverage and width over
## the next 50 trips. A few seconds.
bench-eta-restart: deps
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench eta --trips 150 --restart-after 100 --restart-trips 50 $(ETA_ARGS)

## bench-instructions: instructions per accepted fix and per status under valgrind's callgrind (repeatable on a
## noisy machine: compare two builds with it); the status with the durable state per block and before every status
bench-instructions: deps
	$(SWIFT) build -c release --product ride-instructions
	@./scripts/bench-instructions.sh

## bench-live-map: what the live map and the read API cost the worker by fleet size (1,000 to 100,000 rides): the
## lock held per piece of the walk, the walk, a whole-fleet event's JSON and bytes, the sort of a page
bench-live-map: deps
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench live-map $(LIVE_MAP_ARGS)

## bench-quotes: the live-fleet index (nearest query at 100,000 vehicles) against a brute-force scan, and quotes
bench-quotes: deps
	$(SWIFT) build -c release --product ride-bench
	.build/release/ride-bench quotes

clean:
	rm -rf .build .build-tsan .build-fuzz Benchmarks/.build var
