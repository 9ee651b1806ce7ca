#!/usr/bin/env bash
# How often assay's 95 % intervals cover the truth, and how often two reports of the same model
# are wrongly called different: a scripted judge scores simulated runs as known true scores plus
# seeded Gaussian noise, and the reports are compared as `assay simulate compare` compares them.
# Prints one block per configuration; see bench/README.md ("statistics").
set -euo pipefail
cd "$(dirname "$0")/../.."
SIMULATIONS="${SIMULATIONS:-200}"
cargo build --release -q -p assay-core --example interval_coverage
bin=target/release/examples/interval_coverage
for seed in 1 2 3; do
  "$bin" --simulations "$SIMULATIONS" --seed "$seed"
  echo
done
"$bin" --simulations "$SIMULATIONS" --repeats 3
echo
"$bin" --simulations "$SIMULATIONS" --repeats 10
echo
"$bin" --simulations "$SIMULATIONS" --same-truth yes
