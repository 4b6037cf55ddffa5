# gpuscale: the exporter, the adapter and the activator in one image.
#   docker build -t registry.example.com/gpuscale:0.1.0 .
# Build, push and override the image: docs/install.md ("The image").
# The exporter is built without its `simulate` feature: the image holds no
# simulator (try gpuscale without a GPU from a clone: README, "Try it").
#
# Debian slim rather than distroless: the NVIDIA container toolkit injects
# libnvidia-ml.so.1 and then runs the image's ldconfig so the library can be
# found; distroless has no ldconfig. The binaries also need glibc >= 2.34.
# Pin by digest for reproducible builds: --build-arg RUST_IMAGE=rust@sha256:...
ARG RUST_IMAGE=rust:1.95.0-bookworm
ARG BASE_IMAGE=debian:12.12-slim

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --no-default-features \
        -p gpuscale-exporter -p gpuscale-adapter -p gpuscale-activator \
    && mkdir -p /out/bin \
    && cp target/release/gpuscale-exporter target/release/gpuscale-adapter \
        target/release/gpuscale-activator /out/bin/

# Only to fetch the CA bundle; nothing of apt reaches the final image.
FROM ${BASE_IMAGE} AS certs
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpuscale" \
      org.opencontainers.image.description="NVIDIA GPU exporter with pod identity, and an external metrics adapter for HPA and KEDA" \
      org.opencontainers.image.source="https://github.com/gpuscale/gpuscale" \
      org.opencontainers.image.url="https://github.com/gpuscale/gpuscale" \
      org.opencontainers.image.documentation="https://github.com/gpuscale/gpuscale/blob/main/docs/install.md" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=certs /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/bin/ /usr/local/bin/
# nobody: the adapter runs as is; the exporter's DaemonSet sets uid 0 with no
# capabilities, which connecting to the kubelet's socket needs.
USER 65534:65534
EXPOSE 9400 6443 9102
ENTRYPOINT []
CMD ["gpuscale-exporter"]
