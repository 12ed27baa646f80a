#!/usr/bin/env bash
# Makes a production install of orgdata in OUT_DIR: the compiled server (dist/), the package files
# and node_modules from `npm ci --omit=dev` (no TypeScript, test or lint tool). The Dockerfile's
# build stage runs it, and so does CI (scripts/check-deploy.sh), which then starts the result:
# the image's steps are tested where no image can be built.
#
#   scripts/build-runtime.sh OUT_DIR
#
# Run it from a checkout (or the Docker build context). When the checkout has no dev install yet,
# it makes one (`npm ci`). OUT_DIR must be empty or absent. Needs what compiling better-sqlite3
# needs when no prebuilt binary can be downloaded (python3, make, g++). Start the result with
#   cd OUT_DIR && NODE_OPTIONS=--max-semi-space-size=8 node dist/cli.js serve
set -euo pipefail

out="${1:?usage: scripts/build-runtime.sh OUT_DIR}"
src="$(cd "$(dirname "$0")/.." && pwd)"
cd "$src"

if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "build-runtime: $out is not empty" >&2
  exit 1
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# 1. Compile with the dev dependencies: `npm ci` does, through `prepare`; else `npm run build`. Both
# also copy the API reference's script (Redoc) and the dashboard's icons (Lucide), dev dependencies, into dist/assets.
if [ ! -x node_modules/.bin/tsc ]; then
  echo "== build-runtime: npm ci (dev dependencies, to compile)"
  rm -rf dist
  npm ci --no-audit --no-fund
else
  echo "== build-runtime: compile src/ → dist/"
  rm -rf dist
  npm run -s build
fi

# 2. What the server reads at run time: its package.json (the version), dist/, and the client's
# README (served under /docs). The client workspace's package.json comes along because the lock
# file names the workspace; the client itself is not needed to run the server.
echo "== build-runtime: copy to $out"
cp package.json package-lock.json "$out/"
mkdir -p "$out/client"
cp client/package.json client/README.md "$out/client/"
[ -f dist/assets/redoc/redoc.standalone.js ] || { echo "build-runtime: the build left no dist/assets/redoc" >&2; exit 1; }
[ -f dist/assets/lucide/menu.svg ] || { echo "build-runtime: the build left no dist/assets/lucide" >&2; exit 1; }
cp -R dist "$out/dist"
rm -f "$out/dist/.tsbuildinfo"
mkdir -p "$out/scripts"
cp scripts/compile.mjs scripts/copy-assets.mjs "$out/scripts/"

# 3. The production dependencies only. `prepare` finds no TypeScript and leaves dist/ as built.
echo "== build-runtime: npm ci --omit=dev"
cd "$out"
npm ci --omit=dev --no-audit --no-fund
# better-sqlite3's sources and object files, left by compiling it; the addon is build/Release/*.node.
rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
  node_modules/better-sqlite3/build/Release/obj node_modules/better-sqlite3/build/Release/obj.target \
  node_modules/better-sqlite3/build/Release/.deps node_modules/better-sqlite3/build/deps

echo "== build-runtime: done: $(du -sm node_modules | cut -f1) MB in $out/node_modules"
