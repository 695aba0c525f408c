# syntax=docker/dockerfile:1
# The three kube-dns-rs images from one multi-stage build:
#   docker build --target skydns      -t kube-dns-rs/skydns:0.1.0 .
#   docker build --target kube2sky    -t kube-dns-rs/kube2sky:0.1.0 .
#   docker build --target exechealthz -t kube-dns-rs/exechealthz:0.1.0 .
# The binaries come from one of two stages (BINARIES):
#   source    (the default) scripts/build-release.sh, the project's one
#             release build, in the build stage: the builder's own
#             architecture. On Alpine the native target is musl and the
#             official Rust toolchain links it statically, so the binaries
#             need no libc at run time.
#   prebuilt  target/images/<TARGETARCH>/, cross-compiled on the host for
#             each --platform by deploy/build-images.sh (static musl, with
#             scripts/build-release.sh --target): a multi-arch build with no
#             emulation, since the runtime stages only copy files.
# Each runtime stage is one line of deploy/images.txt (base, binary, user,
# ports, entrypoint), which deploy/podman/images.sh builds from too; the
# deploy_manifests test checks that they agree.

# Keep equal to rust-version in Cargo.toml (checked by
# integration-tests/tests/deploy_manifests/).
ARG RUST_VERSION=1.89
ARG BINARIES=source

FROM rust:${RUST_VERSION}-alpine AS build-source
# protoc and the well-known .proto files: etcd-client's build script;
# make: jemalloc's (tikv-jemalloc-sys), the allocator of skydns and kube2sky.
RUN apk add --no-cache bash musl-dev protoc protobuf-dev make
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    scripts/build-release.sh --out /out

FROM scratch AS build-prebuilt
ARG TARGETARCH
COPY target/images/${TARGETARCH}/ /out/

FROM build-${BINARIES} AS build

# skydns: static binary, CA certificates, /etc/passwd with nobody (65534).
FROM gcr.io/distroless/static-debian12 AS skydns
COPY --from=build /out/skydns /skydns
USER 65534:65534
EXPOSE 53/udp 53/tcp
ENTRYPOINT ["/skydns"]

FROM gcr.io/distroless/static-debian12 AS kube2sky
COPY --from=build /out/kube2sky /kube2sky
USER 65534:65534
EXPOSE 8081/tcp
ENTRYPOINT ["/kube2sky"]

# exec-healthz runs its -cmd with `sh -c`, and the kube-dns pod's command is an
# nslookup: busybox provides both (the musl variant is statically linked).
FROM busybox:1.36.1-musl AS exechealthz
COPY --from=build /out/exec-healthz /exec-healthz
USER 65534:65534
EXPOSE 8080/tcp
ENTRYPOINT ["/exec-healthz"]
