#!/bin/sh
# stamp-version.sh VERSION PAGE... -- write VERSION into installed manual
# pages, in place of the placeholder their .TH line carries in the source
# tree (man/check-pages.sh insists on it).  The version so comes from
# configure, the one place it is set, and no page has to be edited for a
# release.  Run by `make install` (install-data-hook) on the installed
# copies; the source pages keep the placeholder.
set -eu
version=$1
shift
for page in "$@"; do
    # A one-line .so stub has no .TH: nothing to do.
    grep -q '@PACKAGE_VERSION@' "$page" || continue
    sed "s/@PACKAGE_VERSION@/$version/g" "$page" > "$page.tmp"
    mv "$page.tmp" "$page"
done
