#!/bin/sh
# Write dirty pages back, then evict the page cache, and say how:
# - /proc/sys/vm/drop_caches (needs root and a writable /proc/sys): the whole clean page cache;
# - otherwise (a container, no root): every file under the given paths (default: the pagecache
#   example's data directory), one by one, with posix_fadvise(POSIX_FADV_DONTNEED) through GNU
#   dd's iflag=nocache count=0. PAGECACHE_DROP=fadvise takes this way even as root.
set -eu
[ "$#" -gt 0 ] || set -- "${PAGECACHE_DIR:-/var/tmp/washout-pagecache}"
sync
if [ "${PAGECACHE_DROP:-}" != fadvise ] && (echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null; then
  echo "dropped the page cache (drop_caches)"
else
  find "$@" -type f -exec dd iflag=nocache count=0 status=none if={} \;
  echo "evicted the files under $* (fadvise DONTNEED)"
fi
