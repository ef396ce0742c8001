// ThreadSanitizer support for Debian's abseil (linked into every executable of a
// KRUISE_SANITIZE=thread build; see docs/conventions.md "Sanitizers").
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so TSan sees neither the
// memory accesses inside absl::Mutex nor the ordering it provides: every access our code guards
// with an absl::Mutex would be reported as a race. Suppressing those reports would also hide real
// races. Instead, this file interposes the library's exported lock entry points: each wrapper calls
// the library's own function (found with dlsym(RTLD_NEXT)) and tells TSan about the
// happens-before edge it creates (__tsan_release before a lock is given up, __tsan_acquire after
// it is taken), keyed by the Mutex's address. The library calls these entry points through its
// PLT, so absl::Notification and gRPC's locks (absl::Mutex underneath) are annotated as well.
// Locking itself stays abseil's; only TSan's view changes.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#define KRUISE_TSAN_STR2(x) #x
#define KRUISE_TSAN_STR(x) KRUISE_TSAN_STR2(x)

namespace {

// The library's definition of a symbol given its mangled name without the "_ZN[K]4absl<ns>" head.
void* Real(const char* tail, bool konst = false) {
  const char* ns = KRUISE_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  std::string name = std::string(konst ? "_ZNK4absl" : "_ZN4absl") +
                     std::to_string(std::strlen(ns)) + ns + tail;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_tsan: %s not found in abseil: %s\n", name.c_str(), dlerror());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn Lookup(const char* tail, bool konst = false) {
  return reinterpret_cast<Fn>(Real(tail, konst));
}

using MuFn = void (*)(absl::Mutex*);
using MuTryFn = bool (*)(absl::Mutex*);
using MuCondFn = void (*)(absl::Mutex*, const absl::Condition&);
using MuCondDurFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using MuCondTimeFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Time);

// abseil evaluates a waiter's Condition while holding the lock, but inside the library, in the
// waiting thread or in whichever thread unlocks: TSan sees neither. Each evaluation is therefore
// wrapped as a small critical section of its own on the same address (acquire, evaluate,
// release), so what the predicate reads is ordered with the writers that hold the Mutex.
struct AnnotatedCondition {
  AnnotatedCondition(const absl::Condition& inner, absl::Mutex* mu)
      : inner(&inner), mu(mu), condition(&Eval, this) {}
  static bool Eval(AnnotatedCondition* self) {
    __tsan_acquire(self->mu);
    bool holds = self->inner->Eval();
    __tsan_release(self->mu);
    return holds;
  }
  const absl::Condition* inner;
  absl::Mutex* mu;
  absl::Condition condition;
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Lookup<MuFn>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = Lookup<MuFn>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  static const auto real = Lookup<MuTryFn>("5Mutex7TryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Lookup<MuTryFn>("5Mutex13ReaderTryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Lookup<MuFn>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = Lookup<MuFn>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Lookup<MuCondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  AnnotatedCondition annotated(cond, this);
  real(this, annotated.condition);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = Lookup<MuCondFn>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  AnnotatedCondition annotated(cond, this);
  real(this, annotated.condition);
  __tsan_acquire(this);
}

// The *With{Timeout,Deadline} forms hold the lock on return whether or not the condition held.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Lookup<MuCondDurFn>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated(cond, this);
  bool ok = real(this, annotated.condition, timeout);
  __tsan_acquire(this);
  return ok;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Lookup<MuCondTimeFn>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated(cond, this);
  bool ok = real(this, annotated.condition, deadline);
  __tsan_acquire(this);
  return ok;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Lookup<MuCondDurFn>("5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated(cond, this);
  bool ok = real(this, annotated.condition, timeout);
  __tsan_acquire(this);
  return ok;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Lookup<MuCondTimeFn>("5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated(cond, this);
  bool ok = real(this, annotated.condition, deadline);
  __tsan_acquire(this);
  return ok;
}

// Await* give the lock up while they wait and hold it again on return.
void Mutex::Await(const Condition& cond) {
  static const auto real = Lookup<MuCondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  AnnotatedCondition annotated(cond, this);
  real(this, annotated.condition);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Lookup<MuCondDurFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  AnnotatedCondition annotated(cond, this);
  bool ok = real(this, annotated.condition, timeout);
  __tsan_acquire(this);
  return ok;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Lookup<MuCondTimeFn>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  AnnotatedCondition annotated(cond, this);
  bool ok = real(this, annotated.condition, deadline);
  __tsan_acquire(this);
  return ok;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Lookup<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Lookup<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real = Lookup<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

// Notification's fast path reads an atomic the library wrote: give TSan the edge directly.
void Notification::Notify() {
  static const auto real = Lookup<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Lookup<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Lookup<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Lookup<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
