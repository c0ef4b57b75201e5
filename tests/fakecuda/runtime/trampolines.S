/* trampolines.S - the simulated libcudart's exported runtime entry points
 * that are not copies: each jumps to the simulation's function of the same
 * name in libcuda.so.1, whose address runtime.c put into fcrt_slots at load.
 * A jump keeps every argument and the return value as they are, whatever
 * the prototype (x86-64). */
        .text
        .hidden fcrt_slots
        .set rt_index, 0
#define RT_NAME(name)                                   \
        .globl name;                                    \
        .type name, @function;                          \
        .p2align 4;                                     \
name:   jmp *(fcrt_slots + 8 * rt_index)(%rip);         \
        .size name, . - name;                           \
        .set rt_index, rt_index + 1;
#include "names.h"
        .section .note.GNU-stack, "", @progbits
