#!/bin/bash
# Build a tiny sandbox ("pause") image offline as an OCI image-layout tar archive:
# one layer holding a static /pause compiled here. Usage: mkpause.sh OUT.tar IMAGE-REF
set -euo pipefail
out=$1 ref=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/pause.c" <<'C'
#include <signal.h>
#include <unistd.h>
#include <stdlib.h>
static void bye(int s) { (void)s; _exit(0); }
int main(void) {
  signal(SIGINT, bye); signal(SIGTERM, bye);
  for (;;) pause();
}
C
MKIMAGE_BY=mkpause.sh "$(dirname "$0")/mkimage.sh" "$out" "$ref" pause "$tmp/pause.c"
