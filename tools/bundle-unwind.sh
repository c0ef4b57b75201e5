#!/bin/sh
# Copies the build machine's libunwind (libunwind.so.8) beside the shim, into
# DIR (BUILD/unstall; installed: PREFIX/lib/unstall), where the shim looks for
# it first (shim/report/callsite.c). Call-site capture with it takes 40-80 ns;
# without it glibc's backtrace(3) takes 1.3-3.4 us on an H100 host, more than
# a small pageable copy (docs/performance.md). GPU machines often lack the
# library and a package manager, and a build folder is carried there: the copy
# travels with it. Its only other need, liblzma.so.5, is on every distribution.
# Nothing to copy is no error: the shim then uses the system's, or backtrace(3).
#
# Usage: tools/bundle-unwind.sh DIR [CC]
dir=$1 cc=${2:-cc}
[ -n "$dir" ] || { echo "usage: tools/bundle-unwind.sh DIR [CC]" >&2; exit 2; }
found=$($cc -print-file-name=libunwind.so.8 2>/dev/null)
mkdir -p "$dir"
case "$found" in
    /*) [ -f "$found" ] && { cp -L "$found" "$dir/libunwind.so.8.tmp" && mv "$dir/libunwind.so.8.tmp" "$dir/libunwind.so.8"; exit $?; } ;;
esac
rm -f "$dir/libunwind.so.8"
echo "bundle-unwind: no libunwind.so.8 on this machine: the shim will use the system's where it runs, else backtrace(3) (install libunwind8)"
exit 0
