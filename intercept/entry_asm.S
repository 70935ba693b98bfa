/* fanstore_intercept_entry: the common entry every stub calls in place of `syscall`.
 *
 * On entry: [rsp] = return address into the stub, 128 bytes below the caller's red zone;
 * rax = system call number; rdi, rsi, rdx, r10, r8, r9 = arguments; rcx and r11 are free
 * (the kernel clobbers them too). On return everything is as the kernel would leave it:
 * rax = result, rcx/r11 clobbered, every other register, the flags and the whole extended
 * (x87/SSE/AVX/AVX-512...) state unchanged.
 *
 * 1. Save rflags and the general registers on the caller's stack (frame at rbx).
 * 2. Switch to this thread's hook stack (mapping it on first use), unless already on it
 *    (a signal handler's call nested in a running hook keeps going down the same stack).
 * 2b. Ask the prefilter (general registers only): the kernel (restore and execute the
 *    system call at once), the hook (go on), or answered (restore and return its value).
 * 3. Save the vector state into a 64-byte aligned area there (cpu_state.h: the registers
 *    themselves with plain moves, or the whole XCR0 state with XSAVEC).
 * 4. Call fanstore_intercept_dispatch(nr, a1..a6) with DF clear; it returns
 *    {value, handled} in rax:rdx.
 * 5. XRSTOR, switch back, restore; then either return `value` or execute the original
 *    system call with the original registers.
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

/* Pops the frame saved at entry (everything but the return address), flags last. */
.macro RESTORE_FRAME
  pop %r12
  pop %rbp
  pop %rbx
  pop %r9
  pop %r8
  pop %r10
  pop %rdx
  pop %rsi
  pop %rdi
  pop %rax
  popfq
.endm

  .text
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

  movq fanstore_hook_stack_top@gottpoff(%rip), %r11
  movq %fs:(%r11), %rcx
  test %rcx, %rcx
  jz .Lalloc
.Lhave:
  lea -FANSTORE_HOOK_STACK_SIZE(%rcx), %rdx
  cmp %rdx, %rsp
  jb .Lswitch
  cmp %rcx, %rsp
  ja .Lswitch
  jmp .Lon
.Lswitch:
  mov %rcx, %rsp
.Lon:
  /* Prefilter (general registers only): calls the hook does not want go straight to the
     kernel without saving any vector register. */
  and $-16, %rsp
  mov F_RAX(%rbx), %rdi
  mov F_RDI(%rbx), %rsi
  mov F_RSI(%rbx), %rdx
  mov F_RDX(%rbx), %rcx
  mov F_R10(%rbx), %r8
  mov F_R8(%rbx), %r9
  sub $8, %rsp
  pushq F_R9(%rbx)
  call fanstore_intercept_prefilter
  add $16, %rsp
  cmp $1, %rdx            /* kToHook */
  je .Lwanted
  mov %rbx, %rsp
  test %rdx, %rdx         /* kToKernel */
  jz .Lpass
  mov %rax, F_RAX(%rsp)   /* kAnswered: the prefilter's value is the result */
  RESTORE_FRAME
  ret
.Lwanted:
  /* Vector state: see cpu_state.h. Modes 0-2 store the registers with plain moves (the
     hook's code and libc's string functions can touch these and nothing else of the
     extended state); mode 3 uses XSAVEC/XRSTOR on the whole XCR0 state. */
  sub fanstore_xsave_size(%rip), %rsp
  and $-64, %rsp
  cmpb $3, fanstore_vec_mode(%rip)
  je .Lxsave
  stmxcsr 2112(%rsp)
  fnstcw 2116(%rsp)
  cmpb $2, fanstore_vec_mode(%rip)
  je .Lsave512
  cmpb $1, fanstore_vec_mode(%rip)
  je .Lsave256
  movdqa %xmm0, 0(%rsp)
  movdqa %xmm1, 16(%rsp)
  movdqa %xmm2, 32(%rsp)
  movdqa %xmm3, 48(%rsp)
  movdqa %xmm4, 64(%rsp)
  movdqa %xmm5, 80(%rsp)
  movdqa %xmm6, 96(%rsp)
  movdqa %xmm7, 112(%rsp)
  movdqa %xmm8, 128(%rsp)
  movdqa %xmm9, 144(%rsp)
  movdqa %xmm10, 160(%rsp)
  movdqa %xmm11, 176(%rsp)
  movdqa %xmm12, 192(%rsp)
  movdqa %xmm13, 208(%rsp)
  movdqa %xmm14, 224(%rsp)
  movdqa %xmm15, 240(%rsp)
  jmp .Lsaved
.Lsave256:
  vmovdqa %ymm0, 0(%rsp)
  vmovdqa %ymm1, 32(%rsp)
  vmovdqa %ymm2, 64(%rsp)
  vmovdqa %ymm3, 96(%rsp)
  vmovdqa %ymm4, 128(%rsp)
  vmovdqa %ymm5, 160(%rsp)
  vmovdqa %ymm6, 192(%rsp)
  vmovdqa %ymm7, 224(%rsp)
  vmovdqa %ymm8, 256(%rsp)
  vmovdqa %ymm9, 288(%rsp)
  vmovdqa %ymm10, 320(%rsp)
  vmovdqa %ymm11, 352(%rsp)
  vmovdqa %ymm12, 384(%rsp)
  vmovdqa %ymm13, 416(%rsp)
  vmovdqa %ymm14, 448(%rsp)
  vmovdqa %ymm15, 480(%rsp)
  jmp .Lsaved
.Lsave512:
  vmovdqa64 %zmm0, 0(%rsp)
  vmovdqa64 %zmm1, 64(%rsp)
  vmovdqa64 %zmm2, 128(%rsp)
  vmovdqa64 %zmm3, 192(%rsp)
  vmovdqa64 %zmm4, 256(%rsp)
  vmovdqa64 %zmm5, 320(%rsp)
  vmovdqa64 %zmm6, 384(%rsp)
  vmovdqa64 %zmm7, 448(%rsp)
  vmovdqa64 %zmm8, 512(%rsp)
  vmovdqa64 %zmm9, 576(%rsp)
  vmovdqa64 %zmm10, 640(%rsp)
  vmovdqa64 %zmm11, 704(%rsp)
  vmovdqa64 %zmm12, 768(%rsp)
  vmovdqa64 %zmm13, 832(%rsp)
  vmovdqa64 %zmm14, 896(%rsp)
  vmovdqa64 %zmm15, 960(%rsp)
  vmovdqa64 %zmm16, 1024(%rsp)
  vmovdqa64 %zmm17, 1088(%rsp)
  vmovdqa64 %zmm18, 1152(%rsp)
  vmovdqa64 %zmm19, 1216(%rsp)
  vmovdqa64 %zmm20, 1280(%rsp)
  vmovdqa64 %zmm21, 1344(%rsp)
  vmovdqa64 %zmm22, 1408(%rsp)
  vmovdqa64 %zmm23, 1472(%rsp)
  vmovdqa64 %zmm24, 1536(%rsp)
  vmovdqa64 %zmm25, 1600(%rsp)
  vmovdqa64 %zmm26, 1664(%rsp)
  vmovdqa64 %zmm27, 1728(%rsp)
  vmovdqa64 %zmm28, 1792(%rsp)
  vmovdqa64 %zmm29, 1856(%rsp)
  vmovdqa64 %zmm30, 1920(%rsp)
  vmovdqa64 %zmm31, 1984(%rsp)
  kmovq %k0, 2048(%rsp)
  kmovq %k1, 2056(%rsp)
  kmovq %k2, 2064(%rsp)
  kmovq %k3, 2072(%rsp)
  kmovq %k4, 2080(%rsp)
  kmovq %k5, 2088(%rsp)
  kmovq %k6, 2096(%rsp)
  kmovq %k7, 2104(%rsp)
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
  mov F_RAX(%rbx), %rdi
  mov F_RDI(%rbx), %rsi
  mov F_RSI(%rbx), %rdx
  mov F_RDX(%rbx), %rcx
  mov F_R10(%rbx), %r8
  mov F_R8(%rbx), %r9
  sub $8, %rsp
  pushq F_R9(%rbx)
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
  movdqa 0(%rsp), %xmm0
  movdqa 16(%rsp), %xmm1
  movdqa 32(%rsp), %xmm2
  movdqa 48(%rsp), %xmm3
  movdqa 64(%rsp), %xmm4
  movdqa 80(%rsp), %xmm5
  movdqa 96(%rsp), %xmm6
  movdqa 112(%rsp), %xmm7
  movdqa 128(%rsp), %xmm8
  movdqa 144(%rsp), %xmm9
  movdqa 160(%rsp), %xmm10
  movdqa 176(%rsp), %xmm11
  movdqa 192(%rsp), %xmm12
  movdqa 208(%rsp), %xmm13
  movdqa 224(%rsp), %xmm14
  movdqa 240(%rsp), %xmm15
  jmp .Lrestx87
.Lrest256:
  vmovdqa 0(%rsp), %ymm0
  vmovdqa 32(%rsp), %ymm1
  vmovdqa 64(%rsp), %ymm2
  vmovdqa 96(%rsp), %ymm3
  vmovdqa 128(%rsp), %ymm4
  vmovdqa 160(%rsp), %ymm5
  vmovdqa 192(%rsp), %ymm6
  vmovdqa 224(%rsp), %ymm7
  vmovdqa 256(%rsp), %ymm8
  vmovdqa 288(%rsp), %ymm9
  vmovdqa 320(%rsp), %ymm10
  vmovdqa 352(%rsp), %ymm11
  vmovdqa 384(%rsp), %ymm12
  vmovdqa 416(%rsp), %ymm13
  vmovdqa 448(%rsp), %ymm14
  vmovdqa 480(%rsp), %ymm15
  jmp .Lrestx87
.Lrest512:
  vmovdqa64 0(%rsp), %zmm0
  vmovdqa64 64(%rsp), %zmm1
  vmovdqa64 128(%rsp), %zmm2
  vmovdqa64 192(%rsp), %zmm3
  vmovdqa64 256(%rsp), %zmm4
  vmovdqa64 320(%rsp), %zmm5
  vmovdqa64 384(%rsp), %zmm6
  vmovdqa64 448(%rsp), %zmm7
  vmovdqa64 512(%rsp), %zmm8
  vmovdqa64 576(%rsp), %zmm9
  vmovdqa64 640(%rsp), %zmm10
  vmovdqa64 704(%rsp), %zmm11
  vmovdqa64 768(%rsp), %zmm12
  vmovdqa64 832(%rsp), %zmm13
  vmovdqa64 896(%rsp), %zmm14
  vmovdqa64 960(%rsp), %zmm15
  vmovdqa64 1024(%rsp), %zmm16
  vmovdqa64 1088(%rsp), %zmm17
  vmovdqa64 1152(%rsp), %zmm18
  vmovdqa64 1216(%rsp), %zmm19
  vmovdqa64 1280(%rsp), %zmm20
  vmovdqa64 1344(%rsp), %zmm21
  vmovdqa64 1408(%rsp), %zmm22
  vmovdqa64 1472(%rsp), %zmm23
  vmovdqa64 1536(%rsp), %zmm24
  vmovdqa64 1600(%rsp), %zmm25
  vmovdqa64 1664(%rsp), %zmm26
  vmovdqa64 1728(%rsp), %zmm27
  vmovdqa64 1792(%rsp), %zmm28
  vmovdqa64 1856(%rsp), %zmm29
  vmovdqa64 1920(%rsp), %zmm30
  vmovdqa64 1984(%rsp), %zmm31
  kmovq 2048(%rsp), %k0
  kmovq 2056(%rsp), %k1
  kmovq 2064(%rsp), %k2
  kmovq 2072(%rsp), %k3
  kmovq 2080(%rsp), %k4
  kmovq 2088(%rsp), %k5
  kmovq 2096(%rsp), %k6
  kmovq 2104(%rsp), %k7
.Lrestx87:
  ldmxcsr 2112(%rsp)
  fldcw 2116(%rsp)
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
  ret
.Lpass:
  RESTORE_FRAME
  syscall
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
  .size fanstore_intercept_entry, .-fanstore_intercept_entry
  .section .note.GNU-stack,"",@progbits
