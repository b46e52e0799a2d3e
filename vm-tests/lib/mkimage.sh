#!/bin/bash
# Build a tiny image offline as an OCI image-layout tar archive: one layer holding one
# static binary compiled here from a C file, as /NAME, the image's entrypoint.
# Usage: mkimage.sh OUT.tar IMAGE-REF NAME SOURCE.c   (prints the manifest digest)
set -euo pipefail
out=$1 ref=$2 name=$3 src=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/rootfs" "$tmp/oci/blobs/sha256"
gcc -static -Os -s -o "$tmp/rootfs/$name" "$src"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp/rootfs" -cf "$tmp/layer.tar" "$name"
blob() { # file -> prints digest, stores blob
  local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$tmp/oci/blobs/sha256/$d"; echo "$d"; }
layer=$(blob "$tmp/layer.tar"); lsize=$(stat -c %s "$tmp/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/%s"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"containerd-guard vm-tests %s"}]}' \
  "$name" "$layer" "${MKIMAGE_BY:-mkimage.sh}" > "$tmp/config.json"
cfg=$(blob "$tmp/config.json"); csize=$(stat -c %s "$tmp/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$cfg" "$csize" "$layer" "$lsize" > "$tmp/manifest.json"
man=$(blob "$tmp/manifest.json"); msize=$(stat -c %s "$tmp/manifest.json")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"},"platform":{"architecture":"amd64","os":"linux"}}]}' \
  "$man" "$msize" "$ref" "${ref##*:}" > "$tmp/oci/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$tmp/oci/oci-layout"
# docker-archive manifest too, for tools that only read that form
printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":["blobs/sha256/%s"]}]' "$cfg" "$ref" "$layer" > "$tmp/oci/manifest.json"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp/oci" -cf "$out" .
echo "sha256:$man"
