/**
 * @file detmath.h
 * exp and log that give the same bits on every machine.
 *
 * Whether two documents are linked is a comparison of a sketch estimate with
 * the threshold, and the estimate (sketch.c) takes an exponential and a
 * logarithm. libm's exp() and log() are accurate to about an ulp but not
 * correctly rounded: glibc versions differ in the last bit, and glibc picks
 * an FMA or an SSE2 variant at run time by CPU. A pair at the threshold could
 * then be linked on one machine and not on another, and a scan spread over a
 * cluster (SCALE.md) would disagree with itself.
 *
 * These use +, -, *, / only, which IEEE-754 rounds exactly, in a fixed order,
 * plus frexp() and ldexp(), which are exact. The build turns off contraction
 * into FMA (-ffp-contract=off in meson.build), so the compiler cannot reorder
 * them either. Accuracy: within 2e-16 relative of the true value over the
 * ranges sketch.c uses (tests/unit/test_sketch.c checks against libm).
 *
 * Pure functions; thread-safe.
 */
#ifndef IM_DETMATH_H
#define IM_DETMATH_H

#include <math.h>

/* ln 2 split so that k * DET_LN2_HI is exact for |k| < 2^20 (its low 21
 * mantissa bits are zero); DET_LN2_LO is the rest. */
#define DET_LN2_HI  6.93147180369123816490e-01
#define DET_LN2_LO  1.90821492927058770002e-10
#define DET_LOG2E   1.44269504088896338700e+00
#define DET_SQRT1_2 0.70710678118654752440

/* 1 / k! for k = 13 down to 0, and 1 / (2k + 1) for k = 12 down to 1: the
 * series below, evaluated by Horner's rule from the smallest term. */
static const double det_exp_taylor[] = {
	1.0 / 6227020800.0,
	1.0 / 479001600.0,
	1.0 / 39916800.0,
	1.0 / 3628800.0,
	1.0 / 362880.0,
	1.0 / 40320.0,
	1.0 / 5040.0,
	1.0 / 720.0,
	1.0 / 120.0,
	1.0 / 24.0,
	1.0 / 6.0,
	0.5,
	1.0,
	1.0,
};
static const double det_atanh_series[] = {
	1.0 / 25.0, 1.0 / 23.0, 1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0,
	1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,	1.0 / 5.0,  1.0 / 3.0,
};

/** e^x; 0 below -745.2 (where the result underflows), HUGE_VAL above
 * 709.78, NaN for NaN. */
static inline double det_exp(double x)
{
	double k, r, p;

	if (x != x)
		return x;
	if (x < -745.2)
		return 0.0;
	if (x > 709.78)
		return HUGE_VAL;
	/* x = k ln 2 + r with |r| <= ln 2 / 2, then e^r by its Taylor series
	 * to r^13 / 13! (the next term is below 4e-18 there). */
	k = floor(x * DET_LOG2E + 0.5);
	r = (x - k * DET_LN2_HI) - k * DET_LN2_LO;
	p = 0.0;
	for (unsigned i = 0; i < sizeof(det_exp_taylor) / sizeof(double); i++)
		p = p * r + det_exp_taylor[i];
	return ldexp(p, (int)k);
}

/** ln x for finite x > 0; -HUGE_VAL for 0, NaN below 0 or for NaN,
 * HUGE_VAL for HUGE_VAL. */
static inline double det_log(double x)
{
	double m, s, z, p;
	int e;

	if (x != x || x < 0.0)
		return NAN;
	if (x == 0.0)
		return -HUGE_VAL;
	if (x == HUGE_VAL)
		return x;
	/* x = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s) with
	 * s = (m - 1) / (m + 1), |s| <= 0.1716: the series to s^25 / 25 (the
	 * next term is below 2e-20). m - 1 is exact (Sterbenz). */
	m = frexp(x, &e);
	if (m < DET_SQRT1_2) {
		m *= 2.0;
		e--;
	}
	s = (m - 1.0) / (m + 1.0);
	z = s * s;
	p = 0.0;
	for (unsigned i = 0; i < sizeof(det_atanh_series) / sizeof(double); i++)
		p = p * z + det_atanh_series[i];
	p = p * z;
	/* 2s + 2s p, the small part first. */
	return e * DET_LN2_HI + (e * DET_LN2_LO + (2.0 * s * p + 2.0 * s));
}

#endif
