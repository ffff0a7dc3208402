#!/bin/sh
# layers.sh -- keeps HACKING.md's map of the library true: a file of src/
# may include headers of its own layer and of the layers below it, never
# of one above.  The layers are src/'s folders, top down:
#
#   api        the netmutex_* calls, their argument checks, fork handlers
#   local      process-local state: names, the cache, the background thread
#              and its jobs
#   server     what a lock is on the servers: leases, keys, status, the
#              channels releases are published on
#   requests   one request: scripts, quorum, a cluster key's node
#   transport  connections: dialing, replies, the configuration
#   base       text, time and numbers that know nothing of the rest
#
# A few includes go up and are known: they are listed in DEBTS below with
# what undoes them, and the check fails as well when one of them is gone
# (so the list shrinks with the code, never hides a new one).  A header
# found in no layer (hiredis, the generated Lua scripts) is not checked.
set -u
src=${srcdir:-.}/../src
LAYERS="api local server requests transport base"
# file -> header, with what undoes it.  None today.
DEBTS=""

n=0
failed=0
say() { n=$((n + 1)); echo "$1 $n - $2"; }

# rank LAYER: its place from the top (0), or nothing for a folder not listed.
rank() {
    i=0
    for l in $LAYERS; do
        if [ "$l" = "$1" ]; then echo $i; return; fi
        i=$((i + 1))
    done
}

# layer_of HEADER: the folder holding HEADER, if a layer does.
layer_of() {
    for l in $LAYERS; do
        if [ -f "$src/$l/$1" ]; then echo "$l"; return; fi
    done
}

# Every file of src/ is in a layer (src/port and src/lua are their own).
for f in "$src"/*.c "$src"/*.h; do
    [ -e "$f" ] || continue
    say "not ok" "${f#$src/} is in no layer: put it in one of $LAYERS"
    failed=1
done

seen_debts=
for l in $LAYERS; do
    r=$(rank "$l")
    for f in "$src/$l"/*.c "$src/$l"/*.h; do
        [ -e "$f" ] || continue
        name=$l/${f##*/}
        bad=
        for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
            hl=$(layer_of "$h")
            [ -n "$hl" ] || continue
            [ "$(rank "$hl")" -ge "$r" ] && continue
            case " $DEBTS " in
                *" $name->$h "*) seen_debts="$seen_debts $name->$h"; continue ;;
            esac
            bad="$bad $h ($hl)"
        done
        if [ -n "$bad" ]; then
            say "not ok" "$name includes from a higher layer:$bad"
            failed=1
        else
            say "ok" "$name includes only its layer and lower ones"
        fi
    done
done

for d in $DEBTS; do
    case " $seen_debts " in
        *" $d "*) say "ok" "known debt still there: $d" ;;
        *) say "not ok" "known debt $d is gone: take it off DEBTS in tests/layers.sh"
           failed=1 ;;
    esac
done
echo "1..$n"
exit 0
