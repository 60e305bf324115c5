#!/usr/bin/env bash
# Builds the container image in one command: a static eventbox binary (glibc linked in with
# crt-static, so the image needs no libc), then the FROM scratch image of ./Dockerfile.
#
#   scripts/image.sh [TAG]        TAG defaults to eventbox:<version from Cargo.toml>
#
# The binary is built with the release profile, or the one EVENTBOX_IMAGE_PROFILE names: the
# container tests, when they find the image stale, build it with `image-test` (Cargo.toml),
# which rebuilds in about a third of the time; CI builds the release image first, so that is the
# one its tests run.
#
# The binary is built under its own target folder (target/image, or $EVENTBOX_IMAGE_TARGET_DIR),
# so it never waits on the lock of a test build. Prints the image's tag and size when done.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
tag=${1:-eventbox:$version}
target=x86_64-unknown-linux-gnu
profile=${EVENTBOX_IMAGE_PROFILE:-release}
export CARGO_TARGET_DIR=${EVENTBOX_IMAGE_TARGET_DIR:-target/image}

# --target keeps the flag off build scripts and proc macros (they run on the host, dynamically
# linked); only the eventbox binary is static.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --profile "$profile" --locked --target "$target" --bin eventbox

# The Dockerfile copies from fixed paths in the build context (see .dockerignore).
mkdir -p target/image/context/state
# Put in the image's /data beside the demo bundle: `serve` warns when it serves that folder (no
# bundles were mounted over it). Mounting over /data hides it.
echo "The demo bundle built into the eventbox image; mount your bundles over this folder." \
    > target/image/context/image-demo
binary="$CARGO_TARGET_DIR/$target/$profile/eventbox"
cp "$binary" target/image/context/eventbox.new
mv -f target/image/context/eventbox.new target/image/context/eventbox
# A static (or static-pie) binary needs no shared library; ldd lists none ("=>" lines).
if command -v ldd >/dev/null 2>&1 && ldd target/image/context/eventbox 2>&1 | grep -q '=>'; then
    echo "image.sh: $binary is dynamically linked; a FROM scratch image cannot run it" >&2
    exit 1
fi

source=${EVENTBOX_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}
docker build --quiet \
    --build-arg "VERSION=$version" \
    --build-arg "SOURCE=$source" \
    --tag "$tag" . >/dev/null
size=$(docker image inspect --format '{{.Size}}' "$tag")
echo "$tag $((size / 1024 / 1024)) MB ($size bytes)"
