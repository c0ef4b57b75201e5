/* hot.h - US_HOT marks a function that a small copy or a stream wait runs on
 * every call (the pass-through H2D's classification and findings, the small
 * D2H pipeline, the waits it watches). GCC puts such functions in .text.hot,
 * which the linker gathers in one place: the 41 functions of a small
 * pass-through H2D were spread over 20 of the shim's 4 KiB code pages, and
 * on the H200 hosts (KVM) a copy made after the host was idle met them with
 * cold TLBs and caches, about 1-2 us of the shim's cost there (session 35,
 * docs/performance.md). The list is callgrind's: functions called once a
 * call or more by tools/bench/smallcopy.c's four forms. */
#ifndef UNSTALL_HOT_H
#define UNSTALL_HOT_H

#define US_HOT __attribute__((hot))

#endif
