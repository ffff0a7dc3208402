#!/bin/sh
# port-calls.sh -- keeps every spelled-out list of the pthread calls the
# porting layer takes over in step with the one list, src/port/calls.def,
# that both routes and configure's --wrap list (NETMUTEX_WRAP_LDFLAGS) are
# made from.  Each list is read as a set and compared with the .def's:
#   - the link flags netmutex-wrap.pc hands out (from configure);
#   - <netmutex/pthread.h>'s renames, its prototypes and its top comment
#     (the source route: the compiler checks the prototypes that exist
#     against calls.def, not that none is missing);
#   - netmutex_wrap(3)'s and netmutex_pthread(3)'s lists;
#   - docs/porting.md's brace lists and its --wrap line.
# pthread_mutexattr_* are the source route's own (attr.c), never wrapped.
set -u
top=${srcdir:-.}/..
build=${NM_TOP_BUILDDIR:-..}
n=0
failed=0
tmp=${TMPDIR:-/tmp}/port-calls.$$
trap 'rm -f "$tmp".*' EXIT

sed -n 's/^NM_PORT_CALL(\([a-z_]*\),.*/pthread_\1/p' "$top/src/port/calls.def" | sort >"$tmp.def"

# check WHAT: the names in $tmp.in, one a line, against the .def (the
# type pthread_mutex_t and the attribute calls left out).
check() {
    n=$((n + 1))
    grep -v -e '^pthread_mutexattr_' -e '_t$' "$tmp.in" | sort -u >"$tmp.got"
    if [ -s "$tmp.def" ] && cmp -s "$tmp.def" "$tmp.got"; then
        echo "ok $n - $1 lists the calls of calls.def"
    else
        echo "not ok $n - $1 does not list the calls of calls.def:"
        diff "$tmp.def" "$tmp.got" | sed -n 's/^\([<>]\)/#   \1/p'
        echo "#   (<: in calls.def only, >: in $1 only)"
        failed=1
    fi
}

# Brace lists, pthread_cond_{wait,signal} -> one name a line.
braces() {
    grep -o 'pthread_[a-z]*_{[a-z,]*}' | while IFS= read -r item; do
        stem=${item%%\{*}
        for w in $(echo "$item" | sed 's/.*{\(.*\)}/\1/; s/,/ /g'); do echo "$stem$w"; done
    done
}

# A man page's list: ".BR pthread_mutex_init ," then ".BR _destroy ,"...
# from the line matching FROM to the one matching TO, short names taking
# the family of the last full one.
man_list() {
    sed -n "/$2/,/$3/p" "$1" | awk '
        /^\.BR? pthread_[a-z]+_[a-z]+/ { n = $2; sub(/_[a-z]+$/, "", n); stem = n; print $2; next }
        /^\.BR? _[a-z]+/ { print stem $2 }'
}

pc=$build/netmutex-wrap.pc
if [ -f "$pc" ]; then
    sed -n 's/^Libs:.*-Wl,\(--wrap=[^ ]*\).*/\1/p' "$pc" | tr ',' '\n' |
        sed 's/^--wrap=//' >"$tmp.in"
    check netmutex-wrap.pc
fi
hdr=$top/include/netmutex/pthread.h
sed -n 's/^#define \(pthread_[a-z_]*\) netmutex_\1$/\1/p' "$hdr" >"$tmp.in"
check "pthread.h's renames"
sed -n 's/^NETMUTEX_API int netmutex_\(pthread_[a-z_]*\)(.*/\1/p' "$hdr" |
    grep -v '^pthread_setname$' >"$tmp.in"
check "pthread.h's prototypes"
sed -n '1,/^#ifndef/p' "$hdr" | tr -d ' \n*' | sed 's/}/}\n/g' | braces >"$tmp.in"
check "pthread.h's top comment"
man_list "$top/man/netmutex_wrap.3" 'option for each of' 'Their calls' >"$tmp.in"
check netmutex_wrap.3
man_list "$top/man/netmutex_pthread.3" '^\.BR pthread_mutex_init ,' '^to the' >"$tmp.in"
check netmutex_pthread.3
braces <"$top/docs/porting.md" >"$tmp.in"
check "docs/porting.md's renames"
grep -o -- '--wrap=pthread_[a-z_]*' "$top/docs/porting.md" | sed 's/^--wrap=//' >"$tmp.in"
check "docs/porting.md's --wrap list"
echo "1..$n"
exit $failed
