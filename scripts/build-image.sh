#!/usr/bin/env bash
# Builds quotagate's container image without a container daemon, from the release binary, with
# buildah (Debian: `apt-get install -y buildah`; run as root). The image holds what the Dockerfile's
# image holds: the binary, the shared libraries it links (Debian 12's glibc and libgcc, as
# distroless/cc-debian12), the CA certificates and a passwd entry for uid 65532; entrypoint
# /quotagate, user 65532:65532, no shell.
#
# Then it checks the image from its own root filesystem: mounts it and runs the entrypoint with
# --version in a chroot as uid 65532 (podman run needs cgroups this machine does not give).
#
#   scripts/build-image.sh [IMAGE]          default IMAGE: quotagate:<version from Cargo.toml>
#
# Environment: CARGO_TARGET_DIR (where the release binary is built), ARCHIVE (also write the
# image as a docker-archive here, for `kind load image-archive` or `ctr images import`),
# SKIP_BUILD=1 (use the binary already built).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
IMAGE="${1:-quotagate:$VERSION}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/quotagate"
BUILDAH=(buildah --storage-driver vfs)

command -v buildah >/dev/null || { echo "buildah not found: apt-get install -y buildah" >&2; exit 1; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release --locked --bin quotagate
fi
[ -x "$BIN" ] || { echo "no release binary at $BIN" >&2; exit 1; }

# The root filesystem: the binary, every shared library it links (with the dynamic loader), CA
# certificates, and the nonroot user as distroless names it.
ROOTFS="$(mktemp -d)"
trap 'rm -rf "$ROOTFS"' EXIT
install -m 0755 "$BIN" "$ROOTFS/quotagate"
strip --strip-debug "$ROOTFS/quotagate"
for lib in $(ldd "$BIN" | grep -o '/[^ ]*' | sort -u); do
  mkdir -p "$ROOTFS$(dirname "$lib")"
  cp -L "$lib" "$ROOTFS$lib"
done
mkdir -p "$ROOTFS/etc/ssl/certs" "$ROOTFS/tmp" "$ROOTFS/home/nonroot"
cp -L /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ROOTFS/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ROOTFS/etc/group"
chmod 1777 "$ROOTFS/tmp"
chown 65532:65532 "$ROOTFS/home/nonroot"

ctr="$("${BUILDAH[@]}" from scratch)"
"${BUILDAH[@]}" copy "$ctr" "$ROOTFS" / >/dev/null
"${BUILDAH[@]}" config \
  --entrypoint '["/quotagate"]' --cmd run --user 65532:65532 --workingdir / \
  --label org.opencontainers.image.title=quotagate \
  --label org.opencontainers.image.version="$VERSION" \
  "$ctr"
"${BUILDAH[@]}" commit -q --rm "$ctr" "$IMAGE" >/dev/null

# The check: the image's own rootfs runs its entrypoint as its user.
check="$("${BUILDAH[@]}" from "$IMAGE")"
mnt="$("${BUILDAH[@]}" mount "$check")"
entrypoint="$("${BUILDAH[@]}" inspect --format '{{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.User}}' "$IMAGE")"
version="$(chroot --userspec=65532:65532 "$mnt" /quotagate --version)"
"${BUILDAH[@]}" umount "$check" >/dev/null
"${BUILDAH[@]}" rm "$check" >/dev/null
size="$("${BUILDAH[@]}" images --format '{{.Size}}' "$IMAGE" | head -n1)"
echo "image $IMAGE: $size; entrypoint and user $entrypoint; from its rootfs: $version"
if [ -n "${ARCHIVE:-}" ]; then
  rm -f "$ARCHIVE"
  "${BUILDAH[@]}" push "$IMAGE" "docker-archive:$ARCHIVE:$IMAGE" >/dev/null
  echo "written $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1))"
fi
