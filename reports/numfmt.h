/* Numbers for people, one helper for every text, Markdown and HTML writer: thousands separators,
 * a stated number of significant digits, words for the very large — never "2290.0 days",
 * "$8793447" or "6.898e+10". Each writes into buf (always terminated) and returns buf. */
#ifndef TS_NUMFMT_H
#define TS_NUMFMT_H

#include <stddef.h>

/* `sig` significant digits (1..15), the integer part grouped by thousands: 2290.04 → "2,290"
 * (sig 3), 5.4821 → "5.48", 0.012345 → "0.0123", 1234567 → "1,230,000". Non-finite: "n/a". */
const char *ts_fmt_sig(double v, int sig, char *buf, size_t cap);
/* `decimals` fixed decimals (0..15), the integer part grouped: 2093985.4, 0 → "2,093,985";
 * 1234.5678, 2 → "1,234.57". */
const char *ts_fmt_fixed(double v, int decimals, char *buf, size_t cap);
/* ts_fmt_sig, and from a billion the word: 6.898e10, 4 → "68.98 billion". */
const char *ts_fmt_sig_words(double v, int sig, char *buf, size_t cap);
/* A count (tokens, GPU-hours, tokens/s): whole and grouped below a billion (2,093,985), then
 * 3 significant digits and a word: 6.898e10 → "69.0 billion", 1e12 → "1.00 trillion". */
const char *ts_fmt_count(double v, char *buf, size_t cap);
/* US dollars: "$" and 3 significant digits, grouped; a word from a billion ("$8,790,000",
 * "$1.23 billion"); under $10 at least the cents ("$2.50", "$0.0513"). */
const char *ts_fmt_usd(double v, char *buf, size_t cap);
/* A token count as people write it: "2T" → 2e12, "300B", "1.5e12", "500M", "10k". 0 with a
 * bad text (the caller names the flag). */
double ts_parse_tokens(const char *text);

#endif
