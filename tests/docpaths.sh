#!/bin/sh
# docpaths.sh -- every path under src/ that README.md, HACKING.md or a
# page of docs/ names exists: a file moved or split leaves no doc
# pointing at its old name.  A name with a glob (src/lua/*.lua) must match
# at least one file.  Paths of a user's program given as examples (the
# porting guide's) are listed in EXAMPLES, files the build makes in
# BUILT.
set -u
top=${srcdir:-.}/..
EXAMPLES=" src/a.c "
BUILT=" src/lua_scripts.h src/libnetmutex-core.la "
n=0
failed=0

for path in "$top"/README.md "$top"/HACKING.md "$top"/docs/*.md; do
    [ -f "$path" ] || continue
    doc=${path#"$top"/}
    for p in $(grep -oE '(^|[^./A-Za-z0-9_])src/[A-Za-z0-9_./*-]*[A-Za-z0-9_*/]' "$path" |
        sed 's|^[^s]*src/|src/|' | sort -u); do
        case $EXAMPLES$BUILT in *" $p "*) continue ;; esac
        n=$((n + 1))
        # shellcheck disable=SC2086 # the glob is meant
        if ls -d $top/$p >/dev/null 2>&1; then
            echo "ok $n - $doc: $p"
        else
            echo "not ok $n - $doc names $p, which does not exist"
            failed=1
        fi
    done
done
echo "1..$n"
exit 0
