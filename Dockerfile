# quotagate's container image: one binary, run as non-root uid 65532.
#
#   docker build -t quotagate:0.1.0 .
#
# Without a container daemon, scripts/build-image.sh builds the same image (same base libraries,
# user and entrypoint) from a release binary with buildah.
#
# The binary links glibc dynamically (not `+crt-static`): the Ray dashboard is reached by Service DNS
# names, resolved through glibc's getaddrinfo and NSS, which a statically linked glibc does not
# support reliably. distroless/cc is exactly that glibc, libgcc and the CA certificates.

# The toolchain is pinned (Cargo.lock pins the crates; `--locked` refuses to change it).
FROM docker.io/library/rust:1.95.0-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin quotagate \
 && cp target/release/quotagate /quotagate \
 && /quotagate --version

# Debian 12's glibc, libgcc and ca-certificates, user nonroot (65532), nothing else: no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /quotagate /quotagate
USER 65532:65532
ENTRYPOINT ["/quotagate"]
CMD ["run"]
