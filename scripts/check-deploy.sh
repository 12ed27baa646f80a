#!/usr/bin/env bash
# CI (.ci/run): the ways to deploy orgdata, checked where no container can run.
#   1. A production install made by scripts/build-runtime.sh (the Dockerfile's steps) from the
#      tracked files in a clean folder: no dev tool in its node_modules, its size printed; then
#      started as in production (node itself, no npm), called, and stopped with SIGTERM.
#   2. deploy/compose.yaml, its variables filled in, against the Compose Specification's schema
#      (dclint, a dev dependency).
#   3. deploy/kubernetes rendered by `kubectl kustomize`, with the kinds it must hold.
#   4. deploy/orgdata.service, orgdata-backup.service and orgdata-backup.timer by `systemd-analyze verify`.
#   5. .github/workflows/*.yml against GitHub's workflow schema (action-validator, a dev dependency),
#      and two deliberately broken copies, which it must reject.
# Needs the dev install of this checkout (npm ci), whose TypeScript compiles the copy.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
started=$(date +%s)
work="$(mktemp -d "${TMPDIR:-/tmp}/orgdata-deploy-XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "check-deploy: $*" >&2
  exit 1
}

echo "== deploy 1/5: production install (scripts/build-runtime.sh) from the tracked files"
mkdir -p "$work/src"
# The tracked files as they are in the work tree (uncommitted changes included, untracked files not).
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work/src"
# This checkout's dev dependencies compile the copy (CI has just installed them with `npm ci`).
ln -s "$root/node_modules" "$work/src/node_modules"
"$work/src/scripts/build-runtime.sh" "$work/runtime"
runtime="$work/runtime"

forbidden="redoc lucide-static vitest typescript tsx eslint prettier @stoplight/prism-cli @stoplight/spectral-cli @redocly/cli s3rver playwright-core dclint dependency-cruiser"
for name in $forbidden; do
  found="$(find "$runtime/node_modules" -path "*/node_modules/$name/package.json" -print -quit)"
  [ -z "$found" ] || fail "the production install holds the dev tool $name (${found#"$runtime/"})"
done
size_mb="$(du -sm "$runtime/node_modules" | cut -f1)"
echo "production node_modules: ${size_mb} MB (du -sm), without any of: $forbidden"
[ "$size_mb" -le 150 ] || fail "the production node_modules is ${size_mb} MB, over the 150 MB goal"

port="$(node -e "const s = require('node:net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })")"
base="http://127.0.0.1:$port"
export DATA_DIR="$work/data" PORT="$port" LOG_LEVEL=warn NODE_OPTIONS=--max-semi-space-size=8
cd "$runtime"
node dist/cli.js serve >"$work/server.log" 2>&1 &
server_pid=$!
cd "$root"
for i in $(seq 1 150); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; fail "the production install did not start"; }
  [ "$i" -lt 150 ] || { cat "$work/server.log"; fail "the production install did not answer /readyz within 30 s"; }
  sleep 0.2
done
# The executable, not comm: Node 24 names its main thread (comm) otherwise.
[ "$(basename "$(readlink "/proc/$server_pid/exe")")" = node ] || fail "the server's pid $server_pid is not node itself ($(readlink "/proc/$server_pid/exe"))"
echo "started: node dist/cli.js serve (pid $server_pid) answers $(curl -fsS "$base/readyz")"

cli() { (cd "$runtime" && node dist/cli.js "$@"); }
org="$(cli org create --name "Deploy check" --admin-email ops@example.com --admin-password 'a long passphrase' --json | node -p 'JSON.parse(fs.readFileSync(0, "utf8")).org.id')"
key="$(cli keys create --org "$org" --admin-email ops@example.com --name check --scopes contacts:write --json | node -p 'JSON.parse(fs.readFileSync(0, "utf8")).key')"
created="$(curl -fsS "$base/api/v1/contacts" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -H 'Idempotency-Key: deploy-check-1' -d '{"first_name":"Grace","email":"grace@example.com"}')"
listed="$(curl -fsS "$base/api/v1/contacts" -H "Authorization: Bearer $key")"
node -e '
  const [created, listed] = process.argv.slice(1).map((s) => JSON.parse(s));
  if (created.object !== "contact" || listed.data.length !== 1 || listed.data[0].id !== created.id) {
    console.error("unexpected answers", created, listed);
    process.exit(1);
  }' "$created" "$listed"
# The API reference: Redoc is a dev dependency, so its bundle must come from the copy in dist/.
docs="$(curl -fsS "$base/docs")" || fail "GET /docs failed"
bundle="$(printf '%s' "$docs" | grep -o '/docs/assets/redoc-[0-9.]*-[0-9a-f]*\.js' | head -n 1)"
[ -n "$bundle" ] || fail "/docs names no Redoc bundle: the reference's script is missing from dist/assets/redoc"
init="$(printf '%s' "$docs" | grep -o '/docs/assets/reference-[0-9a-f]*\.js' | head -n 1)"
for asset in "$bundle" "$init"; do
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$base$asset")" = 200 ] || fail "GET $asset did not answer 200"
done
echo "called: org $org, a key, POST and GET /api/v1/contacts, /docs with $bundle and $init"

kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
[ "$status" -eq 0 ] || { cat "$work/server.log"; fail "after SIGTERM the server exited with $status, not 0"; }
echo "stopped: SIGTERM, exit code 0"
# A half-configured cluster (a several-instance setting without DATABASE_URL) refuses to start.
for setting in REDIS_URL=redis://127.0.0.1:1 "BLOB_STORE=s3 S3_BUCKET=orgdata-files"; do
  status=0
  # shellcheck disable=SC2086
  (cd "$runtime" && env DATA_DIR="$work/half" $setting node dist/cli.js serve) >"$work/half.log" 2>&1 || status=$?
  [ "$status" -ne 0 ] || fail "the server started with $setting and no DATABASE_URL"
  grep -q "DATABASE_URL: is required with ${setting%%=*}" "$work/half.log" || { cat "$work/half.log"; fail "the refusal of $setting does not name DATABASE_URL"; }
  [ ! -e "$work/half/orgdata.sqlite" ] || fail "the server refused $setting but made a SQLite database first"
done
echo "refused: REDIS_URL, BLOB_STORE=s3 without DATABASE_URL (exit 1, naming DATABASE_URL)"
unset DATA_DIR PORT LOG_LEVEL NODE_OPTIONS

echo "== deploy 2/5: deploy/compose.yaml against the Compose Specification (dclint)"
# Compose's own interpolation, with the values an operator puts in deploy/.env.
DOMAIN=orgdata.example.com CADDY_TLS=ops@example.com SECRET_KEY=check-secret-key-of-at-least-32-characters \
  POSTGRES_PASSWORD=check-postgres-password MINIO_ROOT_PASSWORD=check-minio-password \
  node -e '
    const fs = require("node:fs");
    const text = fs.readFileSync("deploy/compose.yaml", "utf8").replace(/\$\$|\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}/g, (all, name, op, arg) => {
      if (all === "$$") return "$";
      const value = process.env[name];
      if (value !== undefined && value !== "") return value;
      if (op === "-") return arg;
      throw new Error(`compose.yaml needs ${name}: ${arg ?? "unset"}`);
    });
    fs.writeFileSync(process.argv[1], text);' "$work/compose.yaml"
cp deploy/Caddyfile "$work/Caddyfile"
npx --no-install dclint "$work/compose.yaml"
# Every orgdata service gets DATABASE_URL, and Compose refuses to start without its password.
grep -q '^  DATABASE_URL: postgres://orgdata:${POSTGRES_PASSWORD:?' deploy/compose.yaml || fail "deploy/compose.yaml does not require DATABASE_URL"
[ "$(grep -c 'environment: \*orgdata-environment' deploy/compose.yaml)" -ge 2 ] || fail "an orgdata service of deploy/compose.yaml lacks the shared environment (DATABASE_URL)"
echo "compose.yaml: valid, DATABASE_URL required"

echo "== deploy 3/5: deploy/kubernetes (kubectl kustomize)"
if command -v kubectl >/dev/null; then
  kubectl kustomize deploy/kubernetes >"$work/kubernetes.yaml"
  for kind in Namespace ConfigMap Service Deployment PodDisruptionBudget Ingress; do
    grep -qx "kind: $kind" "$work/kubernetes.yaml" || fail "kubectl kustomize deploy/kubernetes renders no $kind"
  done
  grep -q 'orgdata migrate\|dist/cli.js", "migrate\|- migrate$' "$work/kubernetes.yaml" || fail "no migration step in deploy/kubernetes"
  # Secrets as files, DATABASE_URL among the Secret's required items (no pod without it).
  ! grep -q 'secretRef:' "$work/kubernetes.yaml" || fail "deploy/kubernetes hands a Secret over as environment variables (secretRef)"
  for name in SECRET_KEY DATABASE_URL; do
    grep -q "value: /run/secrets/orgdata/$name\$" "$work/kubernetes.yaml" || fail "deploy/kubernetes does not set ${name}_FILE"
    grep -q -- "- key: $name\$" "$work/kubernetes.yaml" || fail "deploy/kubernetes does not require $name in its Secret"
  done
  echo "deploy/kubernetes: renders $(grep -c '^kind:' "$work/kubernetes.yaml") objects ($(kubectl version --client 2>/dev/null | head -n 1))"
else
  echo "SKIPPED: kubectl is not installed here (Debian has it as kubernetes-client; .ci/run installs it)"
fi

echo "== deploy 4/5: deploy/orgdata.service and the daily backup's service and timer (systemd-analyze verify)"
if command -v systemd-analyze >/dev/null; then
  # Other units' complaints (it loads the ones named in After=) are theirs; ours fail the check.
  units="deploy/orgdata.service deploy/orgdata-backup.service deploy/orgdata-backup.timer"
  # shellcheck disable=SC2086
  systemd-analyze verify $units 2>&1 | tee "$work/verify.log" || fail "systemd-analyze verify $units failed"
  ! grep -q 'orgdata' "$work/verify.log" || fail "systemd-analyze verify has something to say about our units (above)"
  grep -qx 'OnCalendar=daily' deploy/orgdata-backup.timer || fail "deploy/orgdata-backup.timer does not run daily"
  echo "$units: verified"
else
  echo "SKIPPED: systemd-analyze is not installed here (Debian's systemd package; .ci/run installs it)"
fi

echo "== deploy 5/5: .github/workflows against GitHub's workflow schema (action-validator)"
workflows=(.github/workflows/*.yml)
npx --no-install action-validator "${workflows[@]}" || fail "action-validator rejects a workflow (above)"
# It must catch a broken workflow: a job without runs-on, and a misspelt key (steps → step).
sed '/^    runs-on:/d' .github/workflows/release.yml >"$work/no-runs-on.yml"
sed 's/^    steps:$/    step:/' .github/workflows/release.yml >"$work/misspelt.yml"
for bad in no-runs-on misspelt; do
  ! cmp -s .github/workflows/release.yml "$work/$bad.yml" || fail "the broken copy $bad.yml is not broken (release.yml changed shape?)"
  if npx --no-install action-validator "$work/$bad.yml" >"$work/$bad.log" 2>&1; then
    fail "action-validator accepted the broken workflow $bad.yml"
  fi
done
echo "${workflows[*]}: valid; the broken copies (no runs-on, a misspelt key) rejected"

echo "check-deploy: done in $(($(date +%s) - started)) s"
