#!/bin/sh
# make install / make uninstall: the library, the launcher and the tools, the
# configuration profiles. The installed launcher and p2pcheck name the
# installed files (set here); in a checkout they find the build instead.
#
#   PREFIX/bin/unstall, unstall-report, unstall-compare, p2pcheck
#   PREFIX/lib/libunstall.so
#   PREFIX/libexec/unstall/p2pcheck-probe   (when it was built: make p2pcheck)
#   PREFIX/share/unstall/config/*.conf      (unstall --profile NAME, --strict)
#   PREFIX/share/unstall/python/*.py        (option pin_dataloader: the
#                                            launcher puts it on PYTHONPATH)
#   PREFIX/share/unstall/python/unstall_html.py  (unstall-report --html finds
#                                            it there, beside PREFIX/bin)
#
# Usage: tools/install.sh install|uninstall BUILD_DIR PREFIX [DESTDIR]
# DESTDIR stages the files elsewhere (packaging); the paths written into the
# tools stay PREFIX's.
set -e
action=$1 build=$2 prefix=$3 destdir=${4:-}
[ -n "$action" ] && [ -n "$build" ] && [ -n "$prefix" ] || {
    echo "usage: tools/install.sh install|uninstall BUILD_DIR PREFIX [DESTDIR]" >&2; exit 2; }
case "$prefix" in /*) ;; *) echo "install: PREFIX must be an absolute path: $prefix" >&2; exit 2 ;; esac
# LD_PRELOAD splits its list at spaces and colons: no way to name such a path
case "$prefix" in *[\ :\	]*) echo "install: PREFIX may not contain a space or a colon (LD_PRELOAD could not name the library): $prefix" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

bindir=$prefix/bin
libdir=$prefix/lib
libexecdir=$prefix/libexec/unstall
confdir=$prefix/share/unstall/config
pydir=$prefix/share/unstall/python
tools="unstall unstall-report unstall-compare p2pcheck"

if [ "$action" = uninstall ]; then
    for t in $tools; do rm -f "$destdir$bindir/$t"; done
    # (lib/unstall/libunwind.so.8: the libunwind copy earlier builds installed)
    rm -f "$destdir$libdir/libunstall.so" "$destdir$libdir/unstall/libunwind.so.8" "$destdir$libexecdir/p2pcheck-probe"
    for c in "$top"/config/*.conf; do rm -f "$destdir$confdir/$(basename "$c")"; done
    for p in "$here"/python/*.py; do rm -f "$destdir$pydir/$(basename "$p")"; done
    rm -f "$destdir$pydir/unstall_html.py"
    rm -rf "$destdir$pydir/__pycache__"
    # the folders of our own, when nothing else is left in them
    rmdir "$destdir$libexecdir" "$destdir$libdir/unstall" "$destdir$confdir" "$destdir$pydir" "$destdir$prefix/share/unstall" 2>/dev/null || true
    echo "uninstall: removed unstall from $destdir$prefix"
    exit 0
fi
[ "$action" = install ] || { echo "install: unknown action $action" >&2; exit 2; }
[ -f "$build/libunstall.so" ] || { echo "install: $build/libunstall.so missing (make shim)" >&2; exit 1; }

version=$(cat "$top/VERSION" 2>/dev/null || echo unknown)
probe=""
[ -x "$build/p2pcheck/probe" ] && probe=$build/p2pcheck/probe

mkdir -p "$destdir$bindir" "$destdir$libdir" "$destdir$confdir" "$destdir$pydir"
install -m 0755 "$build/libunstall.so" "$destdir$libdir/libunstall.so"
for c in "$top"/config/*.conf; do install -m 0644 "$c" "$destdir$confdir/"; done
for p in "$here"/python/*.py; do install -m 0644 "$p" "$destdir$pydir/"; done
install -m 0644 "$here/unstall_html.py" "$destdir$pydir/"
# compiled now, for this python3: a user cannot write its cache into the prefix,
# and every Python start would compile sitecustomize.py again (about 1.5 ms)
if command -v python3 >/dev/null 2>&1; then
    python3 -m compileall -q -d "$pydir" "$destdir$pydir" >/dev/null 2>&1 || true
fi
# the launcher names the installed library, profiles, sitecustomize and version
sed -e "s|^installed_lib=\$|installed_lib='$libdir/libunstall.so'|" \
    -e "s|^installed_config=\$|installed_config='$confdir'|" \
    -e "s|^installed_python=\$|installed_python='$pydir'|" \
    -e "s|^installed_version=\$|installed_version='$version'|" "$here/unstall" >"$destdir$bindir/unstall.tmp"
grep -q "^installed_lib='" "$destdir$bindir/unstall.tmp" || {
    rm -f "$destdir$bindir/unstall.tmp"; echo "install: tools/unstall has no installed_lib= line" >&2; exit 1; }
chmod 0755 "$destdir$bindir/unstall.tmp" && mv "$destdir$bindir/unstall.tmp" "$destdir$bindir/unstall"
install -m 0755 "$here/unstall-report" "$here/unstall-compare" "$destdir$bindir/"
# p2pcheck names its probe and the library (its --build and --probe still win)
if [ -n "$probe" ]; then
    mkdir -p "$destdir$libexecdir"
    install -m 0755 "$probe" "$destdir$libexecdir/p2pcheck-probe"
fi
sed -e "s|^INSTALLED_PROBE = \"\"\$|INSTALLED_PROBE = \"$libexecdir/p2pcheck-probe\"|" \
    -e "s|^INSTALLED_SHIM = \"\"\$|INSTALLED_SHIM = \"$libdir/libunstall.so\"|" "$here/p2pcheck" >"$destdir$bindir/p2pcheck"
chmod 0755 "$destdir$bindir/p2pcheck"
echo "install: unstall $version in $destdir$prefix (bin/unstall, lib/libunstall.so, share/unstall/config, share/unstall/python)"
[ -n "$probe" ] || echo "install: p2pcheck's probe was not built (make p2pcheck needs the CUDA runtime library): p2pcheck will say so"
exit 0
