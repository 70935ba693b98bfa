/* fanstore_intercept_entry: the common entry every stub calls in place of `syscall`.
 *
 * On entry: [rsp] = return address into the stub, 128 bytes below the caller's red zone;
 * rax = system call number; rdi, rsi, rdx, r10, r8, r9 = arguments; rcx and r11 are free
 * (the kernel clobbers them too). On return every register but rax, rcx and r11, the flags
 * and the whole extended (x87/SSE/AVX/AVX-512...) state are unchanged, and either
 * rcx = 0: rax is the result, or rcx = 1: rax is the number again, the arguments are as
 * they came, and the stub makes the system call itself (intercept/stub.h). Making it there
 * rather than here leaves one page fewer to fetch after the kernel returns, which costs a
 * TLB miss on some virtual machines (docs/design.md, "What a native call pays").
 *
 * 1. Save rflags and the general registers on the caller's stack (frame at rbx).
 * 2. Ask the prefilter (general registers only, on the caller's stack): the kernel
 *    (restore and execute the system call at once), the hook (go on), or answered (restore
 *    and return its value).
 * 2b. Switch to this thread's hook stack (mapping it on first use), unless already on it
 *    (a signal handler's call nested in a running hook keeps going down the same stack).
 *    If the prefilter asked for its second stage (kAgain), call it there and decide by
 *    its answer as in 2.
 * 3. Save the vector state into a 64-byte aligned area there (cpu_state.h: the registers
 *    themselves with plain moves, or the whole XCR0 state with XSAVEC).
 * 4. Call fanstore_intercept_dispatch(nr, a1..a6) with DF clear; it returns
 *    {value, handled} in rax:rdx.
 * 5. XRSTOR (or the moves, then VZEROUPPER if the upper halves were clean at 3), switch
 *    back, restore; then return `value` (rcx = 0) or leave the call to the stub (rcx = 1).
 */
#include "intercept/hook_stack.h"

#define F_R12 0
#define F_RBP 8
#define F_RBX 16
#define F_R9 24
#define F_R8 32
#define F_R10 40
#define F_RDX 48
#define F_RSI 56
#define F_RDI 64
#define F_RAX 72
#define F_FLAGS 80

/* Loads (nr, a1..a6[, seventh]) from the saved frame as C arguments (a6, and the register
   `seventh` if given, on the stack, which must be 16-byte aligned before this; the caller
   drops 16 bytes after the call). */
.macro LOAD_CALL_ARGS seventh
  mov F_RAX(%rbx), %rdi
  mov F_RDI(%rbx), %rsi
  mov F_RSI(%rbx), %rdx
  mov F_RDX(%rbx), %rcx
  mov F_R10(%rbx), %r8
  mov F_R8(%rbx), %r9
  .ifb \seventh
  sub $8, %rsp
  .else
  push \seventh
  .endif
  pushq F_R9(%rbx)
.endm

/* Pops the frame's registers below rax (the order of the pushes at entry, reversed). */
.macro POP_SAVED_BELOW_RAX
  pop %r12
  pop %rbp
  pop %rbx
  pop %r9
  pop %r8
  pop %r10
  pop %rdx
  pop %rsi
  pop %rdi
.endm

/* Puts back the arithmetic flags saved at entry (OF, SF, ZF, AF, PF, CF), the only ones
   the prefilters' compiled code changes, and pops the rest of the frame: the same as
   RESTORE_FRAME after prefilter code, at a fraction of POPFQ's cost (a microcoded
   instruction of ~20 cycles, paid by every call that passes). OF is set by an addition
   that overflows exactly when it was set, then SAHF loads the other five, leaving OF. */
.macro RESTORE_FRAME_ARITH_FLAGS
  movzbl F_FLAGS+1(%rsp), %ecx
  shr $3, %cl             /* OF is bit 11 of rflags */
  and $1, %cl
  add $0x7f, %cl          /* overflows (OF = 1) iff cl was 1 */
  POP_SAVED_BELOW_RAX     /* (pops leave the flags) */
  mov 8(%rsp), %ah        /* the saved flags' low byte: SF ZF AF PF CF */
  sahf
  pop %rax
  lea 8(%rsp), %rsp       /* (the flags slot; lea leaves the flags) */
.endm

/* Pops the frame saved at entry (everything but the return address), flags last. */
.macro RESTORE_FRAME
  POP_SAVED_BELOW_RAX
  pop %rax
  popfq
.endm

  /* The part every call runs sits with the prefilters (call_abi.h FANSTORE_HOT_TEXT); the
     part that goes to the hook follows in .text. */
  .section .text.hot.fanstore,"ax",@progbits
  .globl fanstore_intercept_entry
  .hidden fanstore_intercept_entry
  .type fanstore_intercept_entry, @function
  .p2align 4
fanstore_intercept_entry:
  .cfi_startproc
  pushfq
  push %rax
  push %rdi
  push %rsi
  push %rdx
  push %r10
  push %r8
  push %r9
  push %rbx
  push %rbp
  push %r12
  mov %rsp, %rbx

  /* Prefilter (general registers only), on the caller's stack: calls the hook does not
     want go straight to the kernel without touching the hook stack, the TLS block or any
     vector register. Its frame is bounded at compile time (-Wframe-larger-than). */
  and $-16, %rsp
  LOAD_CALL_ARGS
  call fanstore_intercept_prefilter
  add $16, %rsp
  cmp $1, %rdx            /* kToHook */
  je .Lwanted
  cmp $3, %rdx            /* kAgain */
  je .Lwanted
.Ldecided:
  mov %rbx, %rsp
  test %rdx, %rdx         /* kToKernel */
  jz .Lkernel
  mov %rax, F_RAX(%rsp)   /* kAnswered: the prefilter's value is the result */
  RESTORE_FRAME_ARITH_FLAGS
  mov $0, %ecx            /* (mov: the flags are restored) */
  ret
.Lkernel:
  RESTORE_FRAME_ARITH_FLAGS
  mov $1, %ecx
  ret
  .size fanstore_intercept_entry, .-fanstore_intercept_entry
  .cfi_endproc

  .text
  .type fanstore_intercept_entry_hook, @function
  .p2align 4
fanstore_intercept_entry_hook:
  .cfi_startproc
.Lwanted:
  /* Switch to this thread's hook stack (mapped on first use), unless already on it: a
     signal handler's call nested in a running hook keeps going down the same stack.
     r12:rbp keep the prefilter's {value, action} across the switch. */
  mov %rax, %r12
  mov %rdx, %rbp
  movq fanstore_hook_stack_top@gottpoff(%rip), %r11
  movq %fs:(%r11), %rcx
  test %rcx, %rcx
  jz .Lalloc
.Lhave:
  lea -FANSTORE_HOOK_STACK_SIZE(%rcx), %rdx
  cmp %rdx, %rbx
  jb .Lswitch
  cmp %rcx, %rbx
  ja .Lswitch
  mov %rbx, %rsp
  jmp .Lon
.Lswitch:
  mov %rcx, %rsp
.Lon:
  cmp $3, %rbp            /* kAgain: the prefilter's second stage, on this stack */
  jne .Lhook
  and $-16, %rsp
  LOAD_CALL_ARGS %r12     /* done: the prefilter's value */
  call fanstore_intercept_prefilter_again
  add $16, %rsp
  cmp $1, %rdx            /* kToHook */
  jne .Ldecided
.Lhook:
  /* Vector state: see cpu_state.h. Modes 0-2 store the registers with plain moves (the
     hook's code and libc's string functions can touch these and nothing else of the
     extended state); mode 3 uses XSAVEC/XRSTOR on the whole XCR0 state. */
  sub fanstore_xsave_size(%rip), %rsp
  and $-64, %rsp
  cmpb $3, fanstore_vec_mode(%rip)
  je .Lxsave
  stmxcsr 2112(%rsp)
  fnstcw 2116(%rsp)
  /* Whether the upper halves of ymm/zmm0-15 are in their initial (zero) state: XGETBV(1)
     bits 2 (AVX) and 6 (ZMM_Hi256) clear. Restoring them with moves leaves them "in use",
     and then every legacy SSE instruction the application runs pays a transition penalty
     on Intel cores (find /usr: +10 % of its time); a vzeroupper after the restore puts the
     clean state back. Without XGETBV(1), assume in use (no vzeroupper). */
  movl $0x44, 2120(%rsp)
  cmpb $0, fanstore_xinuse(%rip)
  je .Lxinuse_done
  mov $1, %ecx
  xgetbv
  mov %eax, 2120(%rsp)
.Lxinuse_done:
  cmpb $2, fanstore_vec_mode(%rip)
  je .Lsave512
  cmpb $1, fanstore_vec_mode(%rip)
  je .Lsave256
  .irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  movdqa %xmm\r, \r*16(%rsp)
  .endr
  jmp .Lsaved
.Lsave256:
  .irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vmovdqa %ymm\r, \r*32(%rsp)
  .endr
  jmp .Lsaved
.Lsave512:
  .irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  vmovdqa64 %zmm\r, \r*64(%rsp)
  .endr
  .irp r,0,1,2,3,4,5,6,7
  kmovq %k\r, 2048+\r*8(%rsp)
  .endr
  jmp .Lsaved
.Lxsave:
  xor %eax, %eax
  mov %rax, 512(%rsp)
  mov %rax, 520(%rsp)
  mov %rax, 528(%rsp)
  mov %rax, 536(%rsp)
  mov %rax, 544(%rsp)
  mov %rax, 552(%rsp)
  mov %rax, 560(%rsp)
  mov %rax, 568(%rsp)
  mov fanstore_xcr0_lo(%rip), %eax
  mov fanstore_xcr0_hi(%rip), %edx
  xsavec64 (%rsp)
.Lsaved:

  cld
  LOAD_CALL_ARGS
  call fanstore_intercept_dispatch
  add $16, %rsp
  mov %rax, %r12
  mov %rdx, %rbp

  cmpb $3, fanstore_vec_mode(%rip)
  je .Lxrstor
  cmpb $2, fanstore_vec_mode(%rip)
  je .Lrest512
  cmpb $1, fanstore_vec_mode(%rip)
  je .Lrest256
  .irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  movdqa \r*16(%rsp), %xmm\r
  .endr
  jmp .Lrestx87
.Lrest256:
  .irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
  vmovdqa \r*32(%rsp), %ymm\r
  .endr
  jmp .Lrestx87
.Lrest512:
  .irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  vmovdqa64 \r*64(%rsp), %zmm\r
  .endr
  .irp r,0,1,2,3,4,5,6,7
  kmovq 2048+\r*8(%rsp), %k\r
  .endr
.Lrestx87:
  ldmxcsr 2112(%rsp)
  fldcw 2116(%rsp)
  testl $0x44, 2120(%rsp)
  jnz .Lrestored
  vzeroupper              /* (the uppers were zero: see the save) */
  jmp .Lrestored
.Lxrstor:
  mov fanstore_xcr0_lo(%rip), %eax
  mov fanstore_xcr0_hi(%rip), %edx
  xrstor64 (%rsp)
.Lrestored:
  mov %rbx, %rsp
  test %rbp, %rbp
  jz .Lpass
  mov %r12, F_RAX(%rsp)
  RESTORE_FRAME
  mov $0, %ecx
  ret
.Lpass:
  RESTORE_FRAME
  mov $1, %ecx
  ret

.Lalloc:
  /* mmap(NULL, SIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0) */
  mov $9, %eax
  xor %edi, %edi
  mov $FANSTORE_HOOK_STACK_SIZE, %esi
  mov $3, %edx
  mov $0x4022, %r10d
  mov $-1, %r8
  xor %r9d, %r9d
  syscall
  cmp $-4095, %rax
  jae .Lnostack
  add $FANSTORE_HOOK_STACK_SIZE, %rax
  movq fanstore_hook_stack_top@gottpoff(%rip), %r11
  movq %rax, %fs:(%r11)
  mov %rax, %rcx
  jmp .Lhave
.Lnostack:
  /* No memory for a hook stack: run the hook on the caller's stack. */
  mov %rsp, %rcx
  jmp .Lhave
  .cfi_endproc
  .size fanstore_intercept_entry_hook, .-fanstore_intercept_entry_hook
  .section .note.GNU-stack,"",@progbits
