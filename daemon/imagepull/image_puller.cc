#include "daemon/imagepull/image_puller.h"

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/image_ref.h"

namespace kruise::daemon {
namespace {

std::string Key(const std::string& image, const std::string& tag) {
  return absl::StrCat(image, std::string(1, '\0'), tag);
}

// "name:tag", or "name@sha256:..." when the tag is a digest.
std::string Reference(const std::string& image, const std::string& tag) {
  return absl::StrContains(tag, ":") ? absl::StrCat(image, "@", tag)
                                     : absl::StrCat(image, ":", tag);
}

}  // namespace

struct ImagePuller::Impl : std::enable_shared_from_this<Impl> {
  struct Worker {
    ImageSpec image;  // tags cleared; secrets and sandbox config kept
    TagSpec tag;
    TagStatus status;        // guarded by mu
    bool cancelled = false;  // guarded by mu
    bool done = false;       // guarded by mu
    std::thread thread;
  };

  Impl(ImagePullerOptions o, std::shared_ptr<cri::ImageService> i,
       std::shared_ptr<cri::ContentStatusReader> c, std::shared_ptr<CredentialSource> cr, Clock* cl,
       std::function<void()> ch, PullObserver ob)
      : options(o),
        images(std::move(i)),
        content(std::move(c)),
        credentials(std::move(cr)),
        clock(cl),
        on_change(std::move(ch)),
        observer(std::move(ob)) {}

  const ImagePullerOptions options;
  const std::shared_ptr<cri::ImageService> images;
  const std::shared_ptr<cri::ContentStatusReader> content;
  const std::shared_ptr<CredentialSource> credentials;
  Clock* const clock;
  const std::function<void()> on_change;
  const PullObserver observer;
  std::shared_ptr<spdlog::logger> log = Logger("imagepuller");

  absl::Mutex mu;
  std::map<std::string, std::shared_ptr<Worker>> workers ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<Worker>> retired ABSL_GUARDED_BY(mu);
  ImageStatuses carried ABSL_GUARDED_BY(mu);  // complete tags from the API, not re-pulled
  std::map<std::string, const Worker*> layer_owner ABSL_GUARDED_BY(mu);
  int active ABSL_GUARDED_BY(mu) = 0;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  bool content_unsupported ABSL_GUARDED_BY(mu) = false;

  // Returns false when the worker was cancelled (nothing published).
  bool Publish(Worker& w, const TagStatus& st) {
    {
      absl::MutexLock lock(&mu);
      if (w.cancelled) return false;
      if (w.status == st) return true;
      w.status = st;
    }
    if (on_change) on_change();
    return true;
  }

  // Waits (cancellably) until `deadline`. Returns false when cancelled.
  bool Sleep(Worker& w, absl::Time deadline) {
    absl::MutexLock lock(&mu);
    clock->AwaitWithDeadline(&mu, absl::Condition(&w.cancelled), deadline);
    return !w.cancelled;
  }

  bool AcquireSlot(Worker& w) {
    absl::MutexLock lock(&mu);
    struct Args {
      Impl* impl;
      Worker* w;
    } args{this, &w};
    mu.Await(absl::Condition(
        +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return a->w->cancelled || a->impl->options.max_workers <= 0 ||
                 a->impl->active < a->impl->options.max_workers;
        },
        &args));
    if (w.cancelled) return false;
    ++active;
    return true;
  }

  void ReleaseSlot(const Worker& w) {
    absl::MutexLock lock(&mu);
    --active;
    for (auto it = layer_owner.begin(); it != layer_owner.end();) {
      it = it->second == &w ? layer_owner.erase(it) : std::next(it);
    }
  }

  // Layer downloads seen during one attempt: ref -> {offset, total}.
  using Layers = std::map<std::string, std::pair<int64_t, int64_t>>;

  // Reads the runtime's in-flight downloads and returns the attempt's progress in percent
  // (capped at 99 until PullImage returns). A layer first seen while several pulls run is
  // credited to the first worker that sees it: an estimate, documented as such.
  int PollProgress(Worker& w, Layers& layers) {
    {
      absl::MutexLock lock(&mu);
      if (content == nullptr || content_unsupported) return 0;
    }
    auto statuses = content->ListStatuses({});
    if (!statuses.ok()) {
      if (statuses.status().code() == absl::StatusCode::kUnimplemented) {
        absl::MutexLock lock(&mu);
        content_unsupported = true;
      }
      return -1;
    }
    std::map<std::string, std::pair<int64_t, int64_t>> now;
    for (const auto& s : *statuses) {
      if (absl::StartsWith(s.ref, "layer-")) now[s.ref] = {s.offset, s.total};
    }
    {
      absl::MutexLock lock(&mu);
      for (const auto& [ref, progress] : now) {
        auto [it, inserted] = layer_owner.emplace(ref, &w);
        if (it->second == &w) layers[ref] = progress;
      }
    }
    // A layer that left the list was committed: count it whole.
    for (auto& [ref, progress] : layers) {
      if (now.find(ref) == now.end()) progress.first = progress.second;
    }
    int64_t done = 0, total = 0;
    for (const auto& [ref, progress] : layers) {
      done += std::min(progress.first, progress.second);
      total += progress.second;
    }
    if (total <= 0) return 0;
    return static_cast<int>(std::min<int64_t>(99, done * 100 / total));
  }

  // One PullImage with progress polling beside it. Returns the image ref or the error.
  absl::StatusOr<std::string> PullOnce(Worker& w, TagStatus& st, const std::string& ref,
                                       const cri::v1::AuthConfig* auth,
                                       const cri::v1::PodSandboxConfig& sandbox,
                                       absl::Duration timeout, int64_t* bytes) {
    absl::Mutex poll_mu;
    bool pull_done = false;
    Layers layers;
    std::thread poller([&] {
      absl::MutexLock lock(&poll_mu);
      while (!pull_done) {
        clock->AwaitWithDeadline(&poll_mu, absl::Condition(&pull_done),
                                 clock->Now() + options.progress_interval);
        if (pull_done) break;
        poll_mu.Unlock();
        int p = PollProgress(w, layers);
        if (p > st.progress) {  // monotonic within the attempt
          TagStatus next = st;
          next.progress = p;
          if (Publish(w, next)) st = next;
        }
        poll_mu.Lock();
      }
    });
    auto result = images->PullImage(ref, auth, &sandbox, timeout);
    {
      absl::MutexLock lock(&poll_mu);
      pull_done = true;
    }
    poller.join();
    *bytes = 0;
    for (const auto& [r, p] : layers) *bytes += p.second;
    return result;
  }

  std::string ImageId(const std::string& image, const std::string& ref,
                      const std::string& pulled_ref) {
    auto status = images->ImageStatus(ref);
    if (status.ok() && status->has_value()) {
      for (const std::string& d : (*status)->repo_digests()) {
        if (absl::StartsWith(d, image + "@")) return d;
      }
      if (!(*status)->repo_digests().empty()) {
        const std::string& d = (*status)->repo_digests(0);
        return absl::StrCat(image, d.substr(d.find('@')));
      }
      return absl::StrCat(image, "@", (*status)->id());
    }
    return absl::StrCat(image, "@", pulled_ref);
  }

  void Run(std::shared_ptr<Worker> w) {
    TagStatus st;
    st.tag = w->tag.tag;
    st.version = w->tag.version;
    st.phase = TagPhase::kWaiting;
    Publish(*w, st);
    if (!AcquireSlot(*w)) return Finish(*w);
    Pull(*w, st);
    ReleaseSlot(*w);
    Finish(*w);
  }

  void Finish(Worker& w) {
    absl::MutexLock lock(&mu);
    w.done = true;
  }

  // Whether the runtime answers a cheap read (any answer but UNAVAILABLE: NotFound is an answer).
  bool RuntimeAnswers(const std::string& ref) {
    return images->ImageStatus(ref).status().code() != absl::StatusCode::kUnavailable;
  }

  // Asks the runtime every runtime_probe_interval until it answers or `deadline` passes (the
  // caller's deadline check then fails the tag). Returns false when the worker was cancelled.
  bool WaitForRuntime(Worker& w, const std::string& ref, absl::Time deadline) {
    while (true) {
      if (!Sleep(w, std::min(clock->Now() + options.runtime_probe_interval, deadline))) {
        return false;
      }
      if (clock->Now() >= deadline || RuntimeAnswers(ref)) return true;
    }
  }

  void Fail(Worker& w, TagStatus& st, const std::string& message) {
    st.phase = TagPhase::kFailed;
    st.completion_time = clock->Now();
    st.message = message;
    if (Publish(w, st)) {
      log->warn("pull {}:{} failed: {}", w.image.name, w.tag.tag, message);
      if (observer.on_failure) observer.on_failure(w.image.name, w.tag.tag, message);
    }
  }

  void Pull(Worker& w, TagStatus& st) {
    const absl::Time start = clock->Now();
    st.phase = TagPhase::kPulling;
    st.start_time = start;
    st.progress = 0;
    if (!Publish(w, st)) return;
    if (observer.on_start) observer.on_start(w.image.name, w.tag.tag);
    const PullPolicy& policy = w.tag.pull_policy;
    const absl::Time deadline = policy.active_deadline_seconds
                                    ? start + absl::Seconds(*policy.active_deadline_seconds)
                                    : absl::InfiniteFuture();
    const std::string ref = Reference(w.image.name, w.tag.tag);
    auto parsed = ParseImageReference(ref);
    if (!parsed.ok()) return Fail(w, st, std::string(parsed.status().message()));

    auto succeed = [&](const std::string& image_id, int64_t bytes) {
      st.phase = TagPhase::kSucceeded;
      st.progress = 100;
      st.completion_time = clock->Now();
      st.image_id = image_id;
      st.message.clear();
      if (Publish(w, st)) {
        log->info("pulled {} in {}", ref, absl::FormatDuration(clock->Now() - start));
        if (observer.on_success) {
          observer.on_success(w.image.name, w.tag.tag, clock->Now() - start, bytes);
        }
      }
    };

    if (w.tag.if_not_present()) {
      auto present = images->ImageStatus(parsed->Normalized());
      if (present.ok() && present->has_value()) {
        return succeed(ImageId(w.image.name, parsed->Normalized(), (*present)->id()), 0);
      }
    }

    std::vector<RegistryCredential> creds;
    if (credentials != nullptr && !w.image.pull_secrets.empty()) {
      auto found = credentials->Lookup(parsed->RepositoryWithRegistry(), w.image.pull_secrets);
      if (!found.ok()) return Fail(w, st, std::string(found.status().message()));
      creds = std::move(*found);
    }

    cri::v1::PodSandboxConfig sandbox;
    for (const auto& [k, v] : w.image.sandbox_labels) (*sandbox.mutable_labels())[k] = v;
    for (const auto& [k, v] : w.image.sandbox_annotations) {
      (*sandbox.mutable_annotations())[k] = v;
    }
    (*sandbox.mutable_annotations())["apps.kruise.io/pulling-image-by"] = "kruise-daemon";

    const int64_t attempts = policy.backoff_limit + 1;
    absl::Duration backoff = options.backoff_initial;
    std::string last_error;
    for (int64_t attempt = 0; attempt < attempts; ++attempt) {
      absl::Duration remaining = deadline - clock->Now();
      if (remaining <= absl::ZeroDuration()) {
        return Fail(w, st,
                    absl::StrCat("pulling exceeds the activeDeadlineSeconds (",
                                 *policy.active_deadline_seconds, "s); last error: ", last_error));
      }
      absl::Duration timeout = std::min(absl::Seconds(policy.timeout_seconds), remaining);
      if (attempt > 0) {
        st.progress = 0;  // a new attempt starts over
        if (!Publish(w, st)) return;
      }
      absl::StatusOr<std::string> result = absl::UnknownError("no attempt");
      int64_t bytes = 0;
      if (creds.empty()) {
        result = PullOnce(w, st, parsed->Normalized(), nullptr, sandbox, timeout, &bytes);
      } else {
        for (const RegistryCredential& c : creds) {
          cri::v1::AuthConfig auth;
          auth.set_username(c.username);
          auth.set_password(c.password);
          result = PullOnce(w, st, parsed->Normalized(), &auth, sandbox, timeout, &bytes);
          if (result.ok()) break;
        }
      }
      {
        absl::MutexLock lock(&mu);
        if (w.cancelled) return;
      }
      if (result.ok()) {
        return succeed(ImageId(w.image.name, parsed->Normalized(), *result), bytes);
      }
      last_error = std::string(result.status().message());
      // Whatever the error (a runtime killed mid-pull resets the stream; one that is gone refuses
      // the connection), an attempt counts only if the runtime is there to answer.
      if (!RuntimeAnswers(parsed->Normalized())) {
        log->warn("pull {}: container runtime unavailable ({}); waiting for it, attempt {}/{} "
                  "not counted",
                  ref, last_error, attempt + 1, attempts);
        st.message = absl::StrCat("container runtime unavailable, waiting for it (attempt ",
                                  attempt + 1, " not counted): ", last_error);
        if (!Publish(w, st)) return;
        if (!WaitForRuntime(w, parsed->Normalized(), deadline)) return;
        log->info("pull {}: container runtime answers again", ref);
        st.message.clear();
        if (!Publish(w, st)) return;
        --attempt;  // the same attempt again
        continue;
      }
      log->info("pull {} attempt {}/{} failed: {}", ref, attempt + 1, attempts, last_error);
      if (attempt + 1 < attempts) {
        st.message = absl::StrCat("attempt ", attempt + 1, " failed: ", last_error);
        if (!Publish(w, st)) return;
        if (!Sleep(w, std::min(clock->Now() + backoff, deadline))) return;
        backoff = std::min(backoff * 2, options.backoff_max);
      }
    }
    Fail(w, st, last_error);
  }

  void Cancel(const std::shared_ptr<Worker>& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    w->cancelled = true;
    retired.push_back(w);
  }

  // Joins retired workers that have finished.
  void Reap() {
    std::vector<std::shared_ptr<Worker>> finished;
    {
      absl::MutexLock lock(&mu);
      for (auto it = retired.begin(); it != retired.end();) {
        if ((*it)->done) {
          finished.push_back(*it);
          it = retired.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& w : finished) {
      if (w->thread.joinable()) w->thread.join();
    }
  }
};

ImagePuller::ImagePuller(ImagePullerOptions options, std::shared_ptr<cri::ImageService> images,
                         std::shared_ptr<cri::ContentStatusReader> content,
                         std::shared_ptr<CredentialSource> credentials, Clock* clock,
                         std::function<void()> on_change, PullObserver observer)
    : impl_(std::make_shared<Impl>(options, std::move(images), std::move(content),
                                   std::move(credentials), clock, std::move(on_change),
                                   std::move(observer))) {}

ImagePuller::~ImagePuller() { Stop(); }

void ImagePuller::Sync(const std::vector<ImageSpec>& spec, const ImageStatuses& known) {
  Impl& im = *impl_;
  std::vector<std::shared_ptr<Impl::Worker>> start;
  {
    absl::MutexLock lock(&im.mu);
    if (im.stopped) return;
    std::map<std::string, std::pair<const ImageSpec*, const TagSpec*>> wanted;
    for (const ImageSpec& image : spec) {
      for (const TagSpec& tag : image.tags) wanted[Key(image.name, tag.tag)] = {&image, &tag};
    }
    // Stop workers whose tag is gone or whose version changed.
    for (auto it = im.workers.begin(); it != im.workers.end();) {
      auto want = wanted.find(it->first);
      if (want == wanted.end() || want->second.second->version != it->second->tag.version) {
        im.Cancel(it->second);
        it = im.workers.erase(it);
      } else {
        ++it;
      }
    }
    im.carried.clear();
    for (const auto& [key, pair] : wanted) {
      const auto& [image, tag] = pair;
      if (im.workers.count(key) > 0) continue;
      // Complete at this version already (e.g. written before a restart): keep, do not pull.
      const TagStatus* done = nullptr;
      if (auto k = known.find(image->name); k != known.end()) {
        for (const TagStatus& s : k->second) {
          if (s.tag == tag->tag && s.version == tag->version && s.completed()) done = &s;
        }
      }
      if (done != nullptr) {
        im.carried[image->name].push_back(*done);
        continue;
      }
      auto w = std::make_shared<Impl::Worker>();
      w->image = *image;
      w->image.tags.clear();
      w->tag = *tag;
      w->status.tag = tag->tag;
      w->status.version = tag->version;
      im.workers[key] = w;
      start.push_back(w);
    }
  }
  for (auto& w : start) {
    std::shared_ptr<Impl> impl = impl_;
    w->thread = std::thread([impl, w] { impl->Run(w); });
  }
  im.Reap();
}

ImageStatuses ImagePuller::Statuses() const {
  Impl& im = *impl_;
  absl::MutexLock lock(&im.mu);
  ImageStatuses out = im.carried;
  for (const auto& [key, w] : im.workers) out[w->image.name].push_back(w->status);
  for (auto& [image, tags] : out) {
    std::sort(tags.begin(), tags.end(),
              [](const TagStatus& a, const TagStatus& b) { return a.tag < b.tag; });
  }
  return out;
}

int ImagePuller::active_pulls() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->active;
}

void ImagePuller::Stop() {
  Impl& im = *impl_;
  {
    absl::MutexLock lock(&im.mu);
    if (im.stopped) return;
    im.stopped = true;
    for (auto& [key, w] : im.workers) im.Cancel(w);
    im.workers.clear();
  }
  // Workers in backoff or waiting for a slot return at once; one inside PullImage returns when
  // the runtime answers. Give them a moment, then abandon the rest (they hold `impl_`).
  {
    absl::MutexLock lock(&im.mu);
    struct Args {
      Impl* impl;
    } args{&im};
    im.mu.AwaitWithTimeout(absl::Condition(
                               +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 for (const auto& w : a->impl->retired) {
                                   if (!w->done) return false;
                                 }
                                 return true;
                               },
                               &args),
                           absl::Seconds(2));
  }
  im.Reap();
  absl::MutexLock lock(&im.mu);
  for (auto& w : im.retired) {
    if (w->thread.joinable()) w->thread.detach();
  }
  im.retired.clear();
}

}  // namespace kruise::daemon
