#!/bin/sh
# acl-1.sh -- share 1 of 3 of acl.sh (the core of the suite as a
# least-privileged ACL user; see there): the shares run side by side.
NM_ACL_PART=1/3; export NM_ACL_PART
exec ${SHELL:-/bin/sh} "${srcdir:-.}/acl.sh"
