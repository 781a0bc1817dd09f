# Headroom: one image for the edge, the workers and the CLI (the command picks which).
#
#   docker build -t headroom:local .                       # the image (last stage)
#   docker build --target clickhouse-embedded -t headroom-clickhouse-embedded:local .
#
# The image leaves out the embedded ClickHouse (chdb, ~540 MB): in containers Headroom talks to a
# ClickHouse server over HTTP (CLICKHOUSE_URL). The `clickhouse-embedded` target is the one image
# with chdb: `headroom clickhouse serve` for tests and local use where no ClickHouse server image
# can be had (docker-compose.test.yml).
#
# Behind a TLS-inspecting proxy, give npm the proxy's CA for the install steps only (it is not
# kept in any layer):  docker build --secret id=npmca,src="$NODE_EXTRA_CA_CERTS" …
# Needs BuildKit (the default builder of Docker 23+; DOCKER_BUILDKIT=1 with Docker 20.10).

# Compiles src/ and workers/ with every dependency's JavaScript and types, chdb's included, but
# no platform binaries (--os=none skips every package that declares an OS: chdb's native library,
# biome, esbuild, …), so chdb's types are here without its 540 MB library.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npmca --mount=type=cache,target=/root/.npm,sharing=locked \
    if [ -s /run/secrets/npmca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npmca; fi; \
    npm ci --os=none --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src src
COPY workers workers
COPY bin bin
# The OTLP receiver's .proto files go beside its compiled module (bin/copy-protos.mjs).
RUN npx tsc -p tsconfig.build.json && node bin/copy-protos.mjs && node bin/build-page.mjs

# Production dependencies only: no dev dependencies, no optional ones (chdb).
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npmca --mount=type=cache,target=/root/.npm,sharing=locked \
    if [ -s /run/secrets/npmca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npmca; fi; \
    npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

# Production dependencies with chdb and its native library, for the embedded ClickHouse server.
FROM node:24-bookworm-slim AS deps-embedded
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npmca --mount=type=cache,target=/root/.npm,sharing=locked \
    if [ -s /run/secrets/npmca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npmca; fi; \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24-bookworm-slim AS runtime-base
ENV NODE_ENV=production
WORKDIR /app
# `headroom …` in a container runs the built CLI (keys, dlq, migrate, query, stats).
RUN printf '#!/bin/sh\nexec node /app/dist/src/main/cli.js "$@"\n' >/usr/local/bin/headroom \
    && chmod 0755 /usr/local/bin/headroom

# The embedded ClickHouse server: `headroom clickhouse serve` on 0.0.0.0:8123, data in a volume.
FROM runtime-base AS clickhouse-embedded
ENV TZ=UTC CLICKHOUSE_PATH=/var/lib/clickhouse
RUN mkdir -p /var/lib/clickhouse && chown node:node /var/lib/clickhouse
COPY --from=deps-embedded /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY package.json ./
USER node
VOLUME /var/lib/clickhouse
EXPOSE 8123
HEALTHCHECK --interval=5s --timeout=3s --retries=30 CMD node -e "fetch('http://127.0.0.1:8123/ping').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["headroom", "clickhouse", "serve", "--host", "0.0.0.0", "--port", "8123"]

# The image (the default target): edge by default; `node dist/workers/ingest.js` for a worker,
# `headroom migrate`, `headroom keys create …` for the CLI.
FROM runtime-base
ENV HOST=0.0.0.0 PORT=3000
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY package.json ./
USER node
EXPOSE 3000 9101
# Healthy when the edge's /healthz answers, or a worker's (WORKER_METRICS_PORT).
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "const e=process.env,ok=(p)=>fetch('http://127.0.0.1:'+p+'/healthz').then(r=>r.ok,()=>false);ok(e.PORT||3000).then(a=>a||ok(e.WORKER_METRICS_PORT||9101)).then(a=>process.exit(a?0:1))"
CMD ["node", "dist/src/main/edge.js"]
