/**
 * @file cpu.h
 * Which instruction-set extensions this CPU runs, for the gears that choose
 * their code at run time (text.c, terms.c, html.c, sig.c, sketch.c, sha1.c).
 *
 * IM_CPU_HAS(GLIBC_NAME, "gcc-name") answers from what glibc (2.33 and
 * later) computed when it started the process: the extension present and
 * its registers saved by the kernel, the same answer as
 * __builtin_cpu_supports("gcc-name"). The builtin is the fallback elsewhere;
 * it links libgcc's __cpu_indicator_init, which runs a series of CPUID
 * instructions before main(), each a VM exit in a virtual machine: about
 * 40 µs a process, 4% of a first scan of one file.
 *
 * Thread-safety: both answers are read-only after start-up.
 */
#ifndef IM_CPU_H
#define IM_CPU_H

#include <limits.h> /* __GLIBC__ */
#include <stdbool.h>

#if defined(__GLIBC__) && defined(__x86_64__) && defined(__has_include) &&     \
	__has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#endif

/* Not through CPU_FEATURE_ACTIVE(): glibc 2.36's x86_cpu_active() shifts
 * an int 1 by 31 for bit 31 (AVX512VL), undefined behaviour that UBSan
 * stops at. The same read, unsigned. */
#if defined(CPU_FEATURE_ACTIVE) || defined(CPU_FEATURE_USABLE)
#ifdef CPU_FEATURE_ACTIVE
#define IM_CPU_ARRAY active_array
#else
#define IM_CPU_ARRAY usable_array /* glibc 2.33 */
#endif
static inline bool im_cpu_glibc(unsigned int index)
{
	const unsigned int bits = 8 * sizeof(unsigned int);
	const struct cpuid_feature *f =
		__x86_get_cpuid_feature_leaf(index / (4 * bits));
	unsigned int reg = index % (4 * bits);

	return f->IM_CPU_ARRAY[reg / bits] >> (reg % bits) & 1;
}
#define IM_CPU_HAS(glibc_name, gcc_name) im_cpu_glibc(x86_cpu_##glibc_name)
#define IM_CPU_FROM_GLIBC		 1
#else
#define IM_CPU_HAS(glibc_name, gcc_name) __builtin_cpu_supports(gcc_name)
#define IM_CPU_FROM_GLIBC		 0
#endif

#endif
