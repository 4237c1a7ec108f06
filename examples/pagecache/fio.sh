#!/bin/sh
# Run one of the example's fio jobs (write-a, write-b, seqread, randread) with JSON output.
# The data files live in PAGECACHE_DIR (default /var/tmp/washout-pagecache: on disk, also where
# /tmp is a tmpfs, which has no O_DIRECT and no separate page cache). PAGECACHE_SIZE (default
# 128m) is the data each job writes or reads sequentially, over its two files.
set -eu
export PAGECACHE_DIR="${PAGECACHE_DIR:-/var/tmp/washout-pagecache}"
export PAGECACHE_SIZE="${PAGECACHE_SIZE:-128m}"  # per job: two files of half this size
mkdir -p "$PAGECACHE_DIR"
exec fio --output-format=json "$(dirname "$0")/$1.fio"
