#!/usr/bin/env bash
# `make fuzz`: every decoder of the ride domain under libFuzzer with AddressSanitizer.
#
# Builds one binary from Sources/RideDomain/*.swift and Fuzz/FuzzTargets.swift (-sanitize=fuzzer,address,
# so `make test` never needs libFuzzer), then runs each target for FUZZ_SECONDS (default 60) on its seed
# corpus (Fuzz/corpus/<target>, the golden files for durable state) with the dictionary Fuzz/json.dict.
# The growing corpus lives in .build-fuzz/corpus/; a crash is saved in .build-fuzz/crashes/<target>/ and
# fails the run. Prints executions, coverage and corpus size per target.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
targets="${FUZZ_TARGETS:-telemetry booking assign event cancel stop status-request quote-request availability durable-state retained-status engine}"
out=.build-fuzz
binary=$out/ride-fuzz
mkdir -p "$out"

# RideJSON and RideStatusKit (the contract's vocabulary, whose names the domain's own types still shadow) are built
# as modules of their own; the domain, Locking and WorkerGroup are compiled with the targets as one module, the
# imports of Locking and WorkerGroup dropped from a copy of the sources.
modules="Sources/Locking Sources/RideJSON Sources/RideStatusKit Sources/WorkerGroup Sources/RideDomain"
flags=(-sanitize=fuzzer,address -parse-as-library -O -package-name ridestatus)
library() {  # library NAME FOLDER: a static library and its module, in $out/modules
    # shellcheck disable=SC2046
    swiftc "${flags[@]}" -module-name "$1" -I "$out/modules" -emit-module -emit-module-path "$out/modules/$1.swiftmodule" \
        -emit-library -static -o "$out/modules/lib$1.a" $(find "$2" -name '*.swift' | sort) >> "$out/build.log" 2>&1
}
if [ ! -x "$binary" ] || [ -n "$(find $modules Fuzz -newer "$binary" -name '*.swift' | head -1)" ]; then
    echo "==> building the fuzz targets (libFuzzer and AddressSanitizer; about two minutes)"
    rm -rf "$out/src" "$out/modules" "$out/build.log" && mkdir -p "$out/src" "$out/modules"
    for file in $(find Sources/Locking Sources/WorkerGroup Sources/RideDomain -name '*.swift' | sort); do
        sed -E '/^(public |package )?import (WorkerGroup|Locking)$/d' "$file" > "$out/src/$(echo "$file" | tr / _)"
    done
    # shellcheck disable=SC2086
    if ! library RideJSON Sources/RideJSON || ! library RideStatusKit Sources/RideStatusKit \
        || ! swiftc "${flags[@]}" -module-name RideFuzz -I "$out/modules" -L "$out/modules" -lRideStatusKit -lRideJSON \
            "$out"/src/*.swift Fuzz/FuzzTargets.swift -o "$binary" >> "$out/build.log" 2>&1; then
        grep -v "Cannot export local symbol" "$out/build.log" >&2
        echo "error: the fuzz targets did not build" >&2
        exit 1
    fi
fi

failed=()
printf '%-16s %12s %10s %8s %8s\n' target executions exec/s cov corpus
for target in $targets; do
    corpus="$out/corpus/$target"
    crashes="$out/crashes/$target"
    mkdir -p "$corpus" "$crashes"
    seeds=()
    [ -d "Fuzz/corpus/$target" ] && seeds+=("Fuzz/corpus/$target")
    max_len=4096
    if [ "$target" = durable-state ]; then
        seeds+=(Tests/RideDomainTests/Golden)
        max_len=20000
    fi
    log="$out/$target.log"
    RIDE_FUZZ_TARGET="$target" "$binary" "$corpus" "${seeds[@]}" -dict=Fuzz/json.dict \
        -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 -timeout=10 \
        -artifact_prefix="$crashes/" -print_final_stats=1 > "$log" 2>&1
    status=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
    executions=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
    rate=$(echo "$done_line" | grep -oE 'exec/s: [0-9]+' | grep -oE '[0-9]+')
    coverage=$(echo "$done_line" | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+')
    size=$(echo "$done_line" | grep -oE 'corp: [0-9]+' | grep -oE '[0-9]+')
    printf '%-16s %12s %10s %8s %8s\n' "$target" "${executions:-?}" "${rate:-?}" "${coverage:-?}" "${size:-?}"
    if [ $status -ne 0 ]; then
        failed+=("$target")
        echo "--- $target failed (exit $status); the input is in $crashes/:" >&2
        grep -E 'fuzz check failed|ERROR|Fatal error|SUMMARY|Test unit written' "$log" | head -10 >&2
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing found problems in: ${failed[*]} (logs: $out/<target>.log)" >&2
    exit 1
fi
echo "fuzzing: ${seconds} s per target, no crash in $(echo $targets | wc -w) targets"
