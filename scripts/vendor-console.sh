#!/usr/bin/env bash
# Vendors the web console's browser libraries into crates/engram-http/console/vendor/: htmx
# (requests and swaps driven by HTML attributes), Cytoscape.js (the graph view) and uPlot (the
# charts), each the minified browser build its npm package ships, with its licence.
#
# The files are committed: the binary embeds them with include_bytes!, so neither building nor
# running engram needs Node.js, npm or the network, and the console works offline. This script
# is only run to change them. Each package's tarball comes straight from the npm registry (curl,
# no Node.js) and is checked against the sha512 integrity the registry publishes for that version
# (`dist.integrity`), hard-coded below; vendor/VERSIONS records what is there.
#
# To upgrade: look up the version and its integrity,
#   curl -s https://registry.npmjs.org/htmx.org | jq -r '.versions["2.0.11"].dist.integrity'
# edit the pin below, run this script and commit vendor/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
vendor="$root/crates/engram-http/console/vendor"

# Each pin: package, version, integrity, the name its LICENSE gets in vendor/, then the files it
# gives as PATH-IN-PACKAGE:NAME-IN-VENDOR.
pins=(
  "htmx.org 2.0.11 sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA== htmx.LICENSE dist/htmx.min.js:htmx.min.js"
  "cytoscape 3.35.0 sha512-sMvBIXiGMnhkCaWz2R06FwF/27MNlS+Tqvi17foO9UhnUg3XGZccKjxsvEqQFAQYMSSZmN5SxYzUYlQ0DOJJ3g== cytoscape.LICENSE dist/cytoscape.min.js:cytoscape.min.js"
  "uplot 1.6.32 sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw== uplot.LICENSE dist/uPlot.iife.min.js:uPlot.iife.min.js dist/uPlot.min.css:uPlot.min.css"
)

staged="$(mktemp -d)"
trap 'rm -rf "$staged"' EXIT
mkdir -p "$staged/out"
echo "# Written by scripts/vendor-console.sh: package, version, integrity of its npm tarball." \
  >"$staged/out/VERSIONS"

for pin in "${pins[@]}"; do
  read -r name version integrity license files <<<"$pin"
  # Scoped names (@scope/name) keep only the last part in the tarball's file name.
  tarball="https://registry.npmjs.org/$name/-/${name##*/}-$version.tgz"
  echo "vendor-console: $name $version" >&2
  curl -fsSL -o "$staged/$name.tgz" "$tarball"
  # npm's integrity is "sha512-" and the base64 of the digest; sha512sum -c wants hex.
  expected="$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
  if ! echo "$expected  $staged/$name.tgz" | sha512sum -c --quiet - >/dev/null 2>&1; then
    echo "vendor-console: $tarball does not match its integrity $integrity" >&2
    exit 1
  fi
  mkdir -p "$staged/$name"
  tar -xzf "$staged/$name.tgz" -C "$staged/$name"
  cp "$staged/$name/package/LICENSE" "$staged/out/$license"
  for file in $files; do
    cp "$staged/$name/package/${file%%:*}" "$staged/out/${file##*:}"
  done
  echo "$name $version $integrity" >>"$staged/out/VERSIONS"
done

# Only once every package is verified are the files in vendor/ replaced.
mkdir -p "$vendor"
cp "$staged/out/"* "$vendor/"
ls -l "$vendor" >&2
