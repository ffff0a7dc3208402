/*
 * escape.c -- a lock's name, and the holder the server reports, may hold
 * any byte but NUL.  Printed as they are, a newline would forge a line of
 * output and an escape sequence would move the terminal's cursor or change
 * its title; in JSON, bytes that are not UTF-8 make the whole document
 * invalid.  So every such string goes through here.
 *
 * Text: backslash as \\; control characters (C0, DEL, and C1 whether as a
 * raw byte or as UTF-8) and bytes that are not part of valid UTF-8 as
 * \xNN; the rest as it is, UTF-8 included.
 *
 * JSON (RFC 8259): \" \\ \b \f \n \r \t, \u00XX for the other control
 * characters, valid UTF-8 as it is, and a byte that is not part of valid
 * UTF-8 as \u00XX of its own value, i.e. read as Latin-1.  That last choice
 * keeps the output valid whatever the name, at a price: the name of bytes
 * 0xC3 0xA9 (UTF-8 "é") and the one-byte name 0xE9 both come out as "é".
 */
#include "ac_config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The length of the valid UTF-8 sequence at S, 1 to 4, or 0: overlong
 * forms, surrogates and code points above U+10FFFF are not valid (RFC
 * 3629).  S is NUL-terminated, and a NUL is never a continuation byte, so
 * this never reads past the end. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (s[0] == 0xe0 || s[0] == 0xf0)
        lo = s[0] == 0xe0 ? 0xa0 : 0x90;   /* overlong */
    else if (s[0] == 0xed)
        hi = 0x9f;                         /* surrogates */
    else if (s[0] == 0xf4)
        hi = 0x8f;                         /* above U+10FFFF */
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    }
    return n;
}

/* U+0080 to U+009F in UTF-8: the C1 controls, CSI (U+009B) among them. */
static int is_c1(const unsigned char *s, size_t n)
{
    return n == 2 && s[0] == 0xc2 && s[1] < 0xa0;
}

/* How the sequence of N bytes at S is written as text: 1 as it is, 0 each
 * byte as \xNN. */
static int text_raw(const unsigned char *s, size_t n)
{
    return n > 0 && s[0] >= 0x20 && s[0] != 0x7f && !is_c1(s, n);
}

const char *cli_text(const char *str, char *buf, size_t size)
{
    const unsigned char *s = (const unsigned char *)(str != NULL ? str : "");
    size_t w = 0;

    while (*s != '\0') {
        size_t n = utf8_len(s), len = n > 0 ? n : 1;
        int raw = text_raw(s, n);
        char piece[20];      /* 4 escapes of 4 characters, and a NUL */
        size_t plen = 0;

        if (*s == '\\')
            plen = (size_t)snprintf(piece, sizeof piece, "\\\\");
        for (size_t i = 0; plen == 0 && i < len; i++) {
            if (raw)
                piece[i] = (char)s[i];
            else
                snprintf(piece + 4 * i, sizeof piece - 4 * i, "\\x%02x", s[i]);
        }
        if (plen == 0)
            plen = raw ? len : 4 * len;
        if (w + plen >= size)
            break;
        memcpy(buf + w, piece, plen);
        w += plen;
        s += len;
    }
    if (size > 0)
        buf[w] = '\0';
    return buf;
}

/* The two-character escape of C in JSON, or 0. */
static char json_short(unsigned char c)
{
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '\b': return 'b';
    case '\f': return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
    }
}

void cli_put_json(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str != NULL ? str : "");

    putc('"', f);
    while (*s != '\0') {
        size_t n = utf8_len(s);
        char esc = json_short(*s);

        if (esc != 0) {
            fprintf(f, "\\%c", esc);
            s++;
        } else if (is_c1(s, n)) {
            /* The code point is the second byte's value. */
            fprintf(f, "\\u%04x", s[1]);
            s += 2;
        } else if (n == 0 || *s < 0x20 || *s == 0x7f) {
            fprintf(f, "\\u%04x", *s);
            s++;
        } else {
            fwrite(s, 1, n, f);
            s += n;
        }
    }
    putc('"', f);
}
