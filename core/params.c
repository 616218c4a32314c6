/**
 * @file params.c
 * Defaults and parsing of the algorithm's parameters. The defaults are the
 * ones the evaluation in tools/eval/ chose; README "Choosing the defaults"
 * holds the table behind them.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

void im_params_init(struct im_params *p)
{
	memset(p, 0, sizeof(*p));
	p->min_word_len = 4;
	p->max_digits = 1;
	p->min_unique = 5;
	p->nidf_lo = 0.2;
	p->nidf_hi = 0.8;
	p->secondary_cap = 200000;
	p->k = 4;
	p->keep = 0.3;
	p->seed = 0x1a7c4;
	p->min_terms = 10;
	p->min_ratio = 0.25;
	p->similarity = 0.9;
	p->max_size = 64ull << 20;
	p->hidden = 0;
}

static int fail(char *why, size_t why_len, const char *msg)
{
	if (why && why_len)
		snprintf(why, why_len, "%s", msg);
	return -EINVAL;
}

int im_params_check(const struct im_params *p, char *why, size_t why_len)
{
	if (p->k > IM_MAX_LEXICONS)
		return fail(why, why_len, "k must be between 0 and 31");
	if (!(p->keep > 0.0 && p->keep <= 1.0))
		return fail(why, why_len, "keep must be in (0, 1]");
	if (!(p->nidf_lo >= 0.0 && p->nidf_lo <= p->nidf_hi &&
	      p->nidf_hi <= 1.0))
		return fail(why, why_len,
			    "nidf must be LO:HI with 0 <= LO <= HI <= 1");
	if (!(p->min_ratio >= 0.0 && p->min_ratio <= 1.0))
		return fail(why, why_len, "min_ratio must be in [0, 1]");
	if (!(p->similarity > 0.0 && p->similarity <= 1.0))
		return fail(why, why_len, "similarity must be in (0, 1]");
	if (p->min_word_len == 0)
		return fail(why, why_len, "min_word_len must be at least 1");
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	/* Sizes read better with a suffix: max_size=64M. */
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_unsigned(const char *s, unsigned *out)
{
	uint64_t v;

	if (parse_u64(s, &v) || v > 0xffffffffu)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

int im_params_set(struct im_params *p, const char *name, const char *value)
{
	if (!strcmp(name, "k"))
		return parse_unsigned(value, &p->k);
	if (!strcmp(name, "keep"))
		return parse_double(value, &p->keep);
	if (!strcmp(name, "min_terms"))
		return parse_unsigned(value, &p->min_terms);
	if (!strcmp(name, "min_ratio"))
		return parse_double(value, &p->min_ratio);
	if (!strcmp(name, "similarity"))
		return parse_double(value, &p->similarity);
	if (!strcmp(name, "min_word_len"))
		return parse_unsigned(value, &p->min_word_len);
	if (!strcmp(name, "max_digits"))
		return parse_unsigned(value, &p->max_digits);
	if (!strcmp(name, "min_unique"))
		return parse_unsigned(value, &p->min_unique);
	if (!strcmp(name, "seed"))
		return parse_u64(value, &p->seed);
	if (!strcmp(name, "max_size"))
		return parse_u64(value, &p->max_size);
	if (!strcmp(name, "secondary_cap")) {
		uint64_t v;
		if (parse_u64(value, &v))
			return -EINVAL;
		p->secondary_cap = (size_t)v;
		return 0;
	}
	if (!strcmp(name, "nidf")) {
		const char *colon = value ? strchr(value, ':') : NULL;
		char lo[64];
		double l, h;

		if (!colon || (size_t)(colon - value) >= sizeof(lo))
			return -EINVAL;
		memcpy(lo, value, colon - value);
		lo[colon - value] = '\0';
		if (parse_double(lo, &l) || parse_double(colon + 1, &h))
			return -EINVAL;
		p->nidf_lo = l;
		p->nidf_hi = h;
		return 0;
	}
	return -ENOENT;
}
