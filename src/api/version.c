/*
 * version.c -- which release of the library is loaded.
 *
 * The header's NETMUTEX_VERSION_* and configure's version (AC_INIT, also in
 * netmutex.pc and the manual pages) are written down in two places; the
 * checks below make a build fail rather than ship a library whose header
 * and package disagree about what it is.
 */
#include "nm.h"

#if NETMUTEX_VERSION_MAJOR != NM_PACKAGE_VERSION_MAJOR ||                     \
    NETMUTEX_VERSION_MINOR != NM_PACKAGE_VERSION_MINOR ||                     \
    NETMUTEX_VERSION_PATCH != NM_PACKAGE_VERSION_PATCH
#error "include/netmutex.h's NETMUTEX_VERSION_* differ from AC_INIT's version in configure.ac"
#endif

/* Two levels, so that the macros' values are turned into text, not their
 * names. */
#define NM_TEXT(x) #x
#define NM_VALUE_TEXT(x) NM_TEXT(x)

const char *netmutex_version(void)
{
    return NM_VALUE_TEXT(NETMUTEX_VERSION_MAJOR) "." NM_VALUE_TEXT(
        NETMUTEX_VERSION_MINOR) "." NM_VALUE_TEXT(NETMUTEX_VERSION_PATCH);
}

unsigned int netmutex_version_hex(void)
{
    return NETMUTEX_VERSION_HEX;
}
