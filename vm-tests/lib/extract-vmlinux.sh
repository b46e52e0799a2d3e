#!/bin/bash
# Print the uncompressed ELF kernel contained in a bzImage ($1).
set -euo pipefail
img=$1
try() { # $1 = magic (printf-escaped), $2 = decompressor
  local off
  while read -r off; do
    if tail -c +$((off + 1)) "$img" | $2 2>/dev/null > "$tmp"; then :; fi
    if [ -s "$tmp" ] && [ "$(head -c 4 "$tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
      cat "$tmp"; return 0
    fi
  done < <(LC_ALL=C grep -obUaP "$1" "$img" | cut -d: -f1)
  return 1
}
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
try '\xfd\x37\x7a\x58\x5a\x00' 'xz -dc --single-stream' ||
try '\x28\xb5\x2f\xfd' 'zstd -dc' ||
try '\x1f\x8b\x08' 'gzip -dc' ||
{ echo "extract-vmlinux: no ELF kernel found in $img" >&2; exit 1; }
