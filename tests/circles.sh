#!/bin/sh
# circles.sh -- keeps the include graph of src/ free of circles.
#
# A module is a file stem: x.c and x.h (in one folder) are module x, and
# '#include "y.h"' in either is an edge x -> y when y.h is a file of src/.
# layers.sh keeps the includes from going up a layer; this check also
# catches two modules of one layer that include each other, directly or
# round a longer loop: a circle means neither can be read, changed or
# tested without the other, and the fix is to split what both need into a
# module below them (as settings.h is below config.h, cluster_state.h and
# sentinel.h) or to pass a value down instead of a structure up (as
# redlock.c returns a verdict that lease.c applies).
#
# tsort(1) (coreutils) does the work: given the edges, it names the
# modules of every loop it finds.  Each loop is one "not ok" line; a
# module's files in two folders are one as well (the stems would merge
# them).
set -u
src=${srcdir:-.}/../src
n=0
say() { n=$((n + 1)); echo "$1 $n - $2"; }

if ! command -v tsort >/dev/null 2>&1; then
    say "not ok" "tsort (coreutils) is needed to look for circles"
    echo "1..$n"
    exit 0
fi

tmp=${TMPDIR:-/tmp}/nm-circles.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

# Every file of src/, as "folder stem path", sorted by stem.
find "$src" -type f \( -name '*.c' -o -name '*.h' \) | while read -r f; do
    d=${f%/*}
    b=${f##*/}
    echo "src${d#$src} ${b%.*} $f"
done | sort -k2,2 -k1,1 >"$tmp/files"

# A stem in two folders would make two modules one.
awk '$2 == stem && $1 != dir { print $2 ": " $1 " and " dir }
     { stem = $2; dir = $1 }' "$tmp/files" >"$tmp/split"
if [ -s "$tmp/split" ]; then
    while read -r line; do
        say "not ok" "one stem in two folders, $line: rename one"
    done <"$tmp/split"
else
    say "ok" "every module's files are in one folder"
fi

# The edges, and every module paired with itself (tsort lists a module
# without edges only so), headers found outside src/ left out.
awk '{ print $2 }' "$tmp/files" | sort -u >"$tmp/modules"
while read -r dir stem f; do
    echo "$stem $stem"
    sed -n 's/^[ 	]*#[ 	]*include[ 	]*"\([^"]*\)\.h".*/\1/p' "$f" |
        while read -r h; do
            h=${h##*/}
            [ "$h" = "$stem" ] || echo "$stem $h"
        done
done <"$tmp/files" | awk 'NR == FNR { known[$1] = 1; next } known[$2]' \
    "$tmp/modules" - >"$tmp/edges"

nmod=$(wc -l <"$tmp/modules")
nedge=$(awk '$1 != $2' "$tmp/edges" | sort -u | wc -l)
tsort "$tmp/edges" >/dev/null 2>"$tmp/loops"
# GNU tsort: "tsort: FILE: input contains a loop:", then one line per
# module of the loop, "tsort: NAME", for every loop it breaks.
awk '/input contains a loop/ { if (loop != "") print loop " -> " first
                               loop = ""; next }
     sub(/^tsort: /, "") { if (loop == "") { loop = $0; first = $0 }
                           else loop = loop " -> " $0 }
     END { if (loop != "") print loop " -> " first }' "$tmp/loops" >"$tmp/found"
if [ -s "$tmp/found" ]; then
    while read -r line; do
        say "not ok" "include circle: $line"
    done <"$tmp/found"
elif [ -s "$tmp/loops" ]; then
    say "not ok" "tsort failed: $(head -n 1 "$tmp/loops")"
else
    say "ok" "no include circle among the $((nmod)) modules of src/ ($((nedge)) edges)"
fi
echo "1..$n"
exit 0
