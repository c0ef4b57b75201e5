#!/bin/sh
# Install what the build needs and the machine lacks: uthash (header only),
# cmocka (tests), libunwind8 (loaded at run time for fast call-site capture)
# and libdw1 (loaded at exit for the report's file:line); both optional for
# the shim, installed so that the tests cover them; and pytest for the test of
# tools/pytest_unstall.py (Debian's python3-pytest, for /usr/bin/python3, when
# no python3 here has it); chromium, when no browser is here, for the test of
# unstall-report --html. apt-get on Debian/Ubuntu; elsewhere, say what is missing.
missing=""
[ -f /usr/include/uthash.h ] || [ -f .deps/include/uthash.h ] || missing="$missing uthash-dev"
[ -f /usr/include/cmocka.h ] || missing="$missing libcmocka-dev"
ldconfig -p 2>/dev/null | grep -q 'libunwind\.so\.8 ' || missing="$missing libunwind8"
ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1 ' || missing="$missing libdw1"
python3 -c 'import pytest' 2>/dev/null || /usr/bin/python3 -c 'import pytest' 2>/dev/null ||
    missing="$missing python3-pytest"
# a headless browser for the test of unstall-report --html (tests/html): any of these will do
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
    command -v firefox >/dev/null 2>&1 || missing="$missing chromium"
[ -n "$missing" ] || exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "install-deps: apt-get install$missing"
    apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null || {
        echo "install-deps: apt-get failed for:$missing" >&2; exit 1; }
elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq >/dev/null && sudo apt-get install -y -qq $missing >/dev/null
else
    echo "install-deps: please install:$missing (uthash.h may also go in .deps/include/)" >&2
    exit 1
fi
