# gpuscale: the exporter, the adapter and the NVML simulator in one image.
#   docker build -t gpuscale .
#   docker run --rm -p 9400:9400 gpuscale gpuscale-exporter --simulate
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
        -p gpuscale-exporter -p gpuscale-adapter -p gpuscale-nvml-sim \
    && mkdir -p /out/bin /out/lib \
    && cp target/release/gpuscale-exporter target/release/gpuscale-adapter /out/bin/ \
    && cp target/release/libgpuscale_nvml_sim.so /out/lib/

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/ /usr/local/bin/
# The exporter looks for the simulator here under --simulate.
COPY --from=build /out/lib/libgpuscale_nvml_sim.so /usr/local/lib/gpuscale/
USER 65534:65534
EXPOSE 9400 6443
ENTRYPOINT []
CMD ["gpuscale-exporter"]
