/* hot.h - US_HOT marks a function that a small copy or a stream wait runs on
 * every call (the pass-through H2D's classification and findings, the small
 * D2H pipeline, the waits it watches). GCC puts such functions in .text.hot,
 * which the linker gathers in one place: the 41 functions of a small
 * pass-through H2D were spread over 20 of the shim's 4 KiB code pages; the
 * 89 of the four small forms now sit in 9, fewer pages for a copy to meet
 * with cold TLBs after the host was idle. The list is callgrind's: the
 * functions called once a call or more by tools/bench/smallcopy.c's four
 * forms. Its effect alone was not measured apart from the changes it came
 * with; prefetching all of .text.hot into L2 before the native call took
 * 0.1-0.25 us off two of the steps after it, 2 ms apart, and nothing off the
 * classification (tools/bench/probe.sh on an H200 host). */
#ifndef UNSTALL_HOT_H
#define UNSTALL_HOT_H

#define US_HOT __attribute__((hot))

#endif
