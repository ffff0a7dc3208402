#!/bin/sh
# install.sh -- what `make install` puts where is what README.md says
# ("Build and install"), and the installed files are enough to build and
# run a program: the README's example, compiled with pkg-config's flags
# against a DESTDIR install, then run against a private redis-server.
# TAP output for automake's tap-driver.
set -u
make=${NM_MAKE:-make}
top=${NM_TOP_BUILDDIR:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/netmutex-install.XXXXXX") || exit 99
redis_pid=
cleanup() {
    [ -n "$redis_pid" ] && kill -9 "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 99' HUP INT TERM
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }

if ! "$make" -s -C "$top" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log" | sed 's/^/# /'
    echo "Bail out! make install failed"
    exit 99
fi
prefix=$(sed -n 's/^prefix=//p' "$top/netmutex.pc")
root=$tmp/root$prefix

for f in lib/libnetmutex.so lib/libnetmutex.a lib/libnetmutex-wrap.so lib/libnetmutex-wrap.a \
         include/netmutex.h include/netmutex/pthread.h \
         lib/pkgconfig/netmutex.pc lib/pkgconfig/netmutex-wrap.pc bin/netmutex \
         share/man/man1/netmutex.1 share/man/man3/netmutex_lock.3 \
         share/man/man3/netmutex_set_log.3 share/man/man3/netmutex_wrap.3 \
         share/man/man3/netmutex_version.3 share/man/man3/netmutex_version_hex.3 \
         libexec/netmutex/netmutex-demo share/doc/netmutex/examples/demo.c \
         share/doc/netmutex/examples/redis_server.c share/doc/netmutex/examples/redis_server.h \
         share/doc/netmutex/LICENSE; do
    check "installed: $f" test -e "$root/$f"
done

# The installed pages name configure's version (netmutex.pc's) where the
# source pages hold a placeholder (man/stamp-version.sh).
version=$(sed -n 's/^Version: //p' "$top/netmutex.pc")
for f in man1/netmutex.1 man3/netmutex_lock.3 man3/netmutex_version.3; do
    check "installed $f names version $version" \
        grep -q "^\.TH .*\"netmutex $version\"" "$root/share/man/$f"
done
check "no installed page keeps the version placeholder" \
    eval '! grep -l "@PACKAGE_VERSION@" "$root"/share/man/man*/* >&2'

# pkg-config, relocated to the DESTDIR tree.
pc() { PKG_CONFIG_PATH="$root/lib/pkgconfig" pkg-config --define-variable=prefix="$root" "$@"; }
cflags=$(pc --cflags netmutex)
static_libs=$(pc --libs --static netmutex)
has() { case $1 in *"$2"*) return 0 ;; *) return 1 ;; esac; }
check "pkg-config --cflags netmutex hands out no hiredis flags" eval '! has "$cflags" hiredis'
check "pkg-config --libs --static netmutex names hiredis" has "$static_libs" -lhiredis

# The README's first C block, built from the installed files only.
awk '/^```c$/ { f = 1; next } /^```/ { if (f) exit } f' "${NM_TOP_SRCDIR:?}/README.md" >"$tmp/app.c"
# shellcheck disable=SC2086  # flag lists
check "the README example builds against the installed tree" \
    ${NM_CC:-cc} ${NM_CFLAGS:-} $cflags "$tmp/app.c" -o "$tmp/app" ${NM_LDFLAGS:-} $(pc --libs netmutex)

"${REDIS_SERVER:-redis-server}" --port 0 --unixsocket "$tmp/r.sock" --unixsocketperm 700 \
    --dir "$tmp" --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
redis_pid=$!
i=0
while [ ! -S "$tmp/r.sock" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "and runs, from the installed library" \
    env NETMUTEX_URL="unix://$tmp/r.sock" LD_LIBRARY_PATH="$root/lib" timeout 120 "$tmp/app"
echo "1..$n"
