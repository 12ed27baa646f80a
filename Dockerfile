# syntax=docker/dockerfile:1
# orgdata's image: build with the dev dependencies, run with the production ones only.
#   docker build -t orgdata .
#   docker run -p 3000:3000 -v orgdata-data:/data orgdata
# The install and build steps are scripts/build-runtime.sh, which CI also runs and starts
# (scripts/check-deploy.sh), since no image can be built there. docs/deploy.md.

FROM node:24-bookworm-slim AS build
# better-sqlite3 compiles from source when its prebuilt binary cannot be downloaded.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN scripts/build-runtime.sh /app

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=8 \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=build --chown=root:root /app /app
# The server runs as the image's unprivileged `node` user (uid 1000); the code stays root's and
# read-only to it. DATA_DIR is its only writable place: the SQLite database, local file bytes and
# the generated secret (neither is used with DATABASE_URL, BLOB_STORE=s3 and SECRET_KEY).
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form: node is PID 1 and gets SIGTERM itself (a graceful shutdown, docs/scale-out.md, "Stop it").
# Other commands the same way: docker run --rm orgdata node dist/cli.js migrate
CMD ["node", "dist/cli.js", "serve"]
