#!/bin/sh
# Copies the build machine's libunwind (libunwind.so.8) beside the shim, into
# DIR (BUILD/unstall; installed: PREFIX/lib/unstall), where the shim looks for
# it first (shim/report/unwinder.c). Call-site capture with it takes 40-80 ns;
# without it glibc's backtrace(3) takes 1.3-3.4 us on an H100 host, more than
# a small pageable copy (docs/performance.md). GPU machines often lack the
# library and a package manager, and a build folder is carried there: the copy
# travels with it. Its only other need, liblzma.so.5, is on every distribution.
#
# The copy gets a soname of its own, libunwind-us.8 (as long as the original,
# written over it in place), so that a library the program loads later that
# asks for libunwind.so.8 gets its own copy, never the shim's: the shim then
# turns the copy's signal masking off, which only its own walks may skip
# (unwinder.c says why). Where the soname is not found exactly once, the copy
# keeps its own and its masking stays on.
# Nothing to copy is no error: a copy already there stays, else the shim uses
# the system's, or backtrace(3).
#
# Usage: tools/bundle-unwind.sh DIR [CC]
dir=$1 cc=${2:-cc}
[ -n "$dir" ] || { echo "usage: tools/bundle-unwind.sh DIR [CC]" >&2; exit 2; }
found=$($cc -print-file-name=libunwind.so.8 2>/dev/null)
mkdir -p "$dir"
tmp="$dir/libunwind.so.8.tmp"
case "$found" in
    /*) if [ -f "$found" ]; then
            cp -L "$found" "$tmp" || exit 1
            at=$(LC_ALL=C grep -obUaP 'libunwind\.so\.8\x00' "$tmp" 2>/dev/null | cut -d: -f1)
            case "$at" in
                "" | *[!0-9]*) echo "bundle-unwind: its soname not found once in $found: the copy keeps it (signal masking stays on)" ;;
                *) printf 'libunwind-us.8' | dd of="$tmp" bs=1 seek="$at" conv=notrunc 2>/dev/null ||
                       { rm -f "$tmp"; exit 1; } ;;
            esac
            mv "$tmp" "$dir/libunwind.so.8"
            exit $?
        fi ;;
esac
# A build folder carried to a machine without the library (a GPU machine) may
# be rebuilt there: the copy it carries stays.
if [ -f "$dir/libunwind.so.8" ]; then
    echo "bundle-unwind: no libunwind.so.8 on this machine: the copy already in $dir stays"
    exit 0
fi
echo "bundle-unwind: no libunwind.so.8 on this machine: the shim will use the system's where it runs, else backtrace(3) (install libunwind8)"
exit 0
