/* fanstore_intercept_entry (aarch64): the common entry every stub calls (blr) in place of
 * `svc #0` (intercept/a64.h).
 *
 * On entry: x30 = return address into the stub; the stub has pushed x16 and x30 (sp is
 * 16-byte aligned); x8 = system call number; x0-x5 = arguments. On return every register
 * but x0, the flags (NZCV), q0-q31, FPCR and FPSR are unchanged, and x0 is the result: the
 * kernel's (the call is made here when the prefilter or the hook passes it on) or the
 * runtime's. This is the kernel's own contract for `svc`, which keeps every register but
 * x0; SVE state beyond q0-q31 a system call discards anyway.
 *
 * 1. Save x0-x15, x17-x22, x29 and NZCV on the caller's stack (frame at x19); x29 then
 *    holds the return address.
 * 2. Ask the prefilter (general registers only, on the caller's stack): the kernel (make
 *    the call here), the hook (go on), or answered (return its value).
 * 2b. Switch to this thread's hook stack (mapping it on first use), unless already on it
 *    (a signal handler's call nested in a running hook keeps going down the same stack).
 *    If the prefilter asked for its second stage (kAgain), call it there and decide by
 *    its answer as in 2.
 * 3. Save q0-q31, FPCR and FPSR there; call fanstore_intercept_dispatch(nr, a1..a6),
 *    which returns {value, handled} in x0:x1; restore; make the call or return `value`.
 */
#include "intercept/hook_stack.h"

#define F_X0 0
#define F_X2 16
#define F_X4 32
#define F_X8 64
#define F_NZCV 176
#define FRAME 192

/* x0..x6 = (nr, a1..a6) from the frame at x19. */
.macro LOAD_CALL_ARGS
  ldr x0, [x19, #F_X8]
  ldp x1, x2, [x19, #F_X0]
  ldp x3, x4, [x19, #F_X2]
  ldp x5, x6, [x19, #F_X4]
.endm

  .section .text.hot.fanstore,"ax",@progbits
  .globl fanstore_intercept_entry
  .hidden fanstore_intercept_entry
  .type fanstore_intercept_entry, %function
  .p2align 4
fanstore_intercept_entry:
  sub sp, sp, #FRAME
  stp x0, x1, [sp, #0]
  stp x2, x3, [sp, #16]
  stp x4, x5, [sp, #32]
  stp x6, x7, [sp, #48]
  stp x8, x9, [sp, #64]
  stp x10, x11, [sp, #80]
  stp x12, x13, [sp, #96]
  stp x14, x15, [sp, #112]
  stp x17, x18, [sp, #128]
  stp x19, x20, [sp, #144]
  stp x21, x22, [sp, #160]
  mrs x9, nzcv
  stp x9, x29, [sp, #F_NZCV]
  mov x29, x30            /* x29 (callee-saved) keeps the return address */
  mov x19, sp

  /* Prefilter (general registers only), on the caller's stack. */
  LOAD_CALL_ARGS
  bl fanstore_intercept_prefilter
  cmp x1, #1              /* kToHook */
  b.eq .Lwanted
  cmp x1, #3              /* kAgain */
  b.eq .Lwanted
.Ldecided:                /* x0 = value, x1 = action; sp = x19 */
  cbz x1, .Lkernel        /* kToKernel */
  b .Lreturn              /* kAnswered: x0 is the result */
.Lkernel:
  ldp x0, x1, [x19, #F_X0]
  ldp x2, x3, [x19, #F_X2]
  ldp x4, x5, [x19, #F_X4]
  ldr x8, [x19, #F_X8]
  svc #0
.Lreturn:
  mov sp, x19
  mov x30, x29
  ldp x9, x29, [sp, #F_NZCV]
  msr nzcv, x9
  ldr x1, [sp, #8]
  ldp x2, x3, [sp, #16]
  ldp x4, x5, [sp, #32]
  ldp x6, x7, [sp, #48]
  ldp x8, x9, [sp, #64]
  ldp x10, x11, [sp, #80]
  ldp x12, x13, [sp, #96]
  ldp x14, x15, [sp, #112]
  ldp x17, x18, [sp, #128]
  ldp x19, x20, [sp, #144]
  ldp x21, x22, [sp, #160]
  add sp, sp, #FRAME
  ret
  .size fanstore_intercept_entry, .-fanstore_intercept_entry

  .text
  .type fanstore_intercept_entry_hook, %function
  .p2align 4
fanstore_intercept_entry_hook:
.Lwanted:
  /* x21:x20 keep the prefilter's {value, action} across the switch. */
  mov x21, x0
  mov x20, x1
  mrs x9, tpidr_el0
  adrp x10, :gottprel:fanstore_hook_stack_top
  ldr x10, [x10, #:gottprel_lo12:fanstore_hook_stack_top]
  add x22, x9, x10        /* x22 = &fanstore_hook_stack_top */
  ldr x10, [x22]
  cbz x10, .Lalloc
.Lhave:                   /* x10 = the top of the hook stack */
  sub x11, x10, #(FANSTORE_HOOK_STACK_SIZE >> 12), lsl #12
  cmp x19, x11
  b.lo .Lswitch
  cmp x19, x10
  b.hi .Lswitch
  mov sp, x19             /* already on it */
  b .Lon
.Lswitch:
  mov sp, x10
.Lon:
  cmp x20, #3             /* kAgain: the prefilter's second stage, on this stack */
  b.ne .Lhook
  LOAD_CALL_ARGS
  mov x7, x21             /* done: the prefilter's value */
  bl fanstore_intercept_prefilter_again
  cmp x1, #1              /* kToHook */
  b.eq .Lhook
  mov sp, x19
  b .Ldecided
.Lhook:
  sub sp, sp, #528
  stp q0, q1, [sp, #16]
  stp q2, q3, [sp, #48]
  stp q4, q5, [sp, #80]
  stp q6, q7, [sp, #112]
  stp q8, q9, [sp, #144]
  stp q10, q11, [sp, #176]
  stp q12, q13, [sp, #208]
  stp q14, q15, [sp, #240]
  stp q16, q17, [sp, #272]
  stp q18, q19, [sp, #304]
  stp q20, q21, [sp, #336]
  stp q22, q23, [sp, #368]
  stp q24, q25, [sp, #400]
  stp q26, q27, [sp, #432]
  stp q28, q29, [sp, #464]
  stp q30, q31, [sp, #496]
  mrs x9, fpcr
  mrs x10, fpsr
  stp x9, x10, [sp, #0]
  LOAD_CALL_ARGS
  bl fanstore_intercept_dispatch
  mov x21, x0
  mov x20, x1
  ldp x9, x10, [sp, #0]
  msr fpcr, x9
  msr fpsr, x10
  ldp q0, q1, [sp, #16]
  ldp q2, q3, [sp, #48]
  ldp q4, q5, [sp, #80]
  ldp q6, q7, [sp, #112]
  ldp q8, q9, [sp, #144]
  ldp q10, q11, [sp, #176]
  ldp q12, q13, [sp, #208]
  ldp q14, q15, [sp, #240]
  ldp q16, q17, [sp, #272]
  ldp q18, q19, [sp, #304]
  ldp q20, q21, [sp, #336]
  ldp q22, q23, [sp, #368]
  ldp q24, q25, [sp, #400]
  ldp q26, q27, [sp, #432]
  ldp q28, q29, [sp, #464]
  ldp q30, q31, [sp, #496]
  mov sp, x19
  cbz x20, .Lkernel
  mov x0, x21
  b .Lreturn

.Lalloc:
  /* mmap(NULL, SIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0) */
  mov x0, #0
  mov x1, #(FANSTORE_HOOK_STACK_SIZE >> 12)
  lsl x1, x1, #12
  mov x2, #3
  mov x3, #0x4022
  mov x4, #-1
  mov x5, #0
  mov x8, #222
  svc #0
  cmn x0, #4095
  b.hs .Lnostack
  add x10, x0, #(FANSTORE_HOOK_STACK_SIZE >> 12), lsl #12
  str x10, [x22]
  b .Lhave
.Lnostack:
  /* No memory for a hook stack: run the hook on the caller's stack. */
  mov x10, x19
  b .Lhave
  .size fanstore_intercept_entry_hook, .-fanstore_intercept_entry_hook
  .section .note.GNU-stack,"",@progbits
