/* Size of the per-thread hook stack the assembly entry switches to (mapped lazily, one per
   thread that makes an intercepted call, unmapped at thread exit). Shared with entry_asm.S.
   Thread-safety: a constant. */
#ifndef FANSTORE_INTERCEPT_HOOK_STACK_H_
#define FANSTORE_INTERCEPT_HOOK_STACK_H_
#define FANSTORE_HOOK_STACK_SIZE 262144
#endif
