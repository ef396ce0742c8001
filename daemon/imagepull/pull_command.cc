#include "daemon/imagepull/pull_command.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cri/discovery.h"
#include "cri/grpc_cri.h"
#include "common/image_ref.h"
#include "daemon/imagepull/credential_keyring.h"
#include "daemon/imagepull/image_puller.h"

namespace kruise::daemon {
namespace {

using Json = nlohmann::json;

// yaml-cpp node -> JSON, keeping scalars' natural types (ints, bools) as the API server would.
Json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json j = Json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      Json j = Json::array();
      for (const auto& v : n) j.push_back(ToJson(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      int64_t i;
      if (YAML::convert<int64_t>::decode(n, i) &&
          s.find_first_not_of("-0123456789") == std::string::npos) {
        return i;
      }
      if (s == "true" || s == "false") return s == "true";
      return s;
    }
    default:
      return nullptr;
  }
}

TagSpec DefaultTag(const std::string& tag, const PullCommandOptions& o) {
  TagSpec t;
  t.tag = tag;
  t.version = 1;
  t.pull_policy.timeout_seconds = o.timeout_seconds;
  t.pull_policy.backoff_limit = o.backoff_limit;
  t.image_pull_policy = o.always ? "Always" : "IfNotPresent";
  return t;
}

void Merge(std::vector<ImageSpec>& out, ImageSpec add) {
  for (ImageSpec& existing : out) {
    if (existing.name != add.name) continue;
    for (TagSpec& t : add.tags) {
      bool dup = false;
      for (const TagSpec& e : existing.tags) dup |= e.tag == t.tag;
      if (!dup) existing.tags.push_back(std::move(t));
    }
    return;
  }
  out.push_back(std::move(add));
}

}  // namespace

absl::StatusOr<std::vector<ImageSpec>> ImagesFromReferences(const std::vector<std::string>& refs,
                                                            const PullCommandOptions& o) {
  std::vector<ImageSpec> out;
  for (const std::string& r : refs) {
    auto ref = ParseImageReference(r);
    if (!ref.ok()) return ref.status();
    ImageSpec is;
    is.name = ref->RepositoryWithRegistry();
    is.tags.push_back(DefaultTag(ref->digest.empty() ? ref->tag : ref->digest, o));
    Merge(out, std::move(is));
  }
  return out;
}

absl::StatusOr<std::vector<ImageSpec>> ImagesFromYaml(const std::string& yaml,
                                                      const PullCommandOptions& o) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed YAML: ", e.what()));
  }
  std::vector<ImageSpec> out;
  int index = 0;
  for (const YAML::Node& doc : docs) {
    ++index;
    if (!doc.IsDefined() || doc.IsNull()) continue;
    Json obj;
    try {
      obj = ToJson(doc);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("document ", index, ": ", e.what()));
    }
    if (obj.is_array()) {  // a plain list of references
      std::vector<std::string> refs;
      for (const Json& v : obj) {
        if (!v.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat("document ", index, ": a list must hold image references"));
        }
        refs.push_back(v.get<std::string>());
      }
      auto specs = ImagesFromReferences(refs, o);
      if (!specs.ok()) return specs.status();
      for (auto& s : *specs) Merge(out, std::move(s));
      continue;
    }
    std::string kind = obj.is_object() ? obj.value("kind", "") : "";
    if (kind == "NodeImage") {
      auto specs = ParseNodeImageSpec(obj);
      if (!specs.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("document ", index, " (NodeImage): ", specs.status().message()));
      }
      for (auto& s : *specs) Merge(out, std::move(s));
    } else if (kind == "ImagePullJob" || kind == "ImageListPullJob") {
      const Json spec = obj.value("spec", Json::object());
      std::vector<std::string> refs;
      if (kind == "ImagePullJob") {
        if (!spec.contains("image") || !spec["image"].is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat("document ", index, " (ImagePullJob): spec.image is required"));
        }
        refs.push_back(spec["image"].get<std::string>());
      } else {
        for (const Json& v : spec.value("images", Json::array())) {
          if (v.is_string()) refs.push_back(v.get<std::string>());
        }
      }
      PullCommandOptions job = o;
      const Json pp = spec.value("pullPolicy", Json::object());
      if (pp.contains("timeoutSeconds") && pp["timeoutSeconds"].is_number_integer()) {
        job.timeout_seconds = pp["timeoutSeconds"].get<int64_t>();
      }
      if (pp.contains("backoffLimit") && pp["backoffLimit"].is_number_integer()) {
        job.backoff_limit = pp["backoffLimit"].get<int64_t>();
      }
      if (spec.value("imagePullPolicy", "") == "Always") job.always = true;
      auto specs = ImagesFromReferences(refs, job);
      if (!specs.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("document ", index, " (", kind, "): ", specs.status().message()));
      }
      for (auto& s : *specs) Merge(out, std::move(s));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "document ", index, ": kind \"", kind,
          "\" is not ImagePullJob, ImageListPullJob or NodeImage (or a list of images)"));
    }
  }
  return out;
}

namespace {

class KeyringSource final : public CredentialSource {
 public:
  explicit KeyringSource(CredentialKeyring ring) : ring_(std::move(ring)) {}
  absl::StatusOr<std::vector<RegistryCredential>> Lookup(const std::string& repository,
                                                         const std::vector<SecretRef>&) override {
    return ring_.Lookup(repository);
  }

 private:
  CredentialKeyring ring_;
};

std::string Bar(int percent, int width = 24) {
  int filled = percent * width / 100;
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

}  // namespace

int RunPullCommand(const PullCommandOptions& options) {
  std::vector<ImageSpec> specs;
  for (const std::string& f : options.files) {
    std::stringstream buf;
    if (f == "-") {
      buf << std::cin.rdbuf();
    } else {
      std::ifstream in(f);
      if (!in) {
        std::fprintf(stderr, "pull: cannot read %s\n", f.c_str());
        return 2;
      }
      buf << in.rdbuf();
    }
    auto more = ImagesFromYaml(buf.str(), options);
    if (!more.ok()) {
      std::fprintf(stderr, "pull: %s: %s\n", f.c_str(),
                   std::string(more.status().message()).c_str());
      return 2;
    }
    for (auto& s : *more) Merge(specs, std::move(s));
  }
  auto refs = ImagesFromReferences(options.images, options);
  if (!refs.ok()) {
    std::fprintf(stderr, "pull: %s\n", std::string(refs.status().message()).c_str());
    return 2;
  }
  for (auto& s : *refs) Merge(specs, std::move(s));
  if (specs.empty()) {
    std::fprintf(stderr, "pull: no images given (use -f FILE or image references)\n");
    return 2;
  }

  CredentialKeyring ring;
  if (!options.docker_config.empty()) {
    std::ifstream in(options.docker_config);
    std::stringstream buf;
    buf << in.rdbuf();
    absl::Status s = in ? ring.AddDockerConfigJson(buf.str(), options.docker_config)
                        : absl::NotFoundError(absl::StrCat("cannot read ", options.docker_config));
    if (!s.ok()) {
      std::fprintf(stderr, "pull: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    // Every image may use the docker config: give each a placeholder secret reference so the
    // puller asks the keyring.
    for (ImageSpec& is : specs) is.pull_secrets.push_back({"local", options.docker_config});
  }

  cri::DiscoveryOptions d;
  d.host_run_dir = options.host_run_dir;
  d.socket_override = options.socket_file;
  auto rt = cri::DiscoverRuntime(d);
  if (!rt.ok()) {
    std::fprintf(stderr, "pull: no container runtime: %s\n",
                 std::string(rt.status().message()).c_str());
    return 1;
  }
  auto channel = cri::DialCri(rt->endpoint);
  if (!channel.ok()) {
    std::fprintf(stderr, "pull: %s\n", std::string(channel.status().message()).c_str());
    return 1;
  }
  std::printf("runtime %s %s at %s\n", rt->runtime_name.c_str(), rt->runtime_version.c_str(),
              rt->socket_path.c_str());

  absl::Mutex mu;
  int changes = 0;
  ImagePullerOptions po;
  po.max_workers = options.max_workers;
  po.progress_interval = absl::Milliseconds(200);
  ImagePuller puller(po, std::make_shared<cri::GrpcImageService>(*channel),
                     std::make_shared<cri::GrpcContentService>(*channel),
                     std::make_shared<KeyringSource>(std::move(ring)), Clock::Real(), [&] {
                       absl::MutexLock lock(&mu);
                       ++changes;
                     });
  const absl::Time start = absl::Now();
  puller.Sync(specs, {});
  size_t total = 0;
  for (const ImageSpec& s : specs) total += s.tags.size();
  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::map<std::string, std::string> last_line;
  size_t drawn = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu);
      int seen = changes;
      auto changed = [&] { return changes != seen; };
      mu.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(250));
    }
    ImageStatuses st = puller.Statuses();
    size_t done = 0;
    std::vector<std::string> lines;
    for (const ImageSpec& is : specs) {
      for (const TagSpec& t : is.tags) {
        const TagStatus* s = nullptr;
        for (const TagStatus& x : st[is.name]) {
          if (x.tag == t.tag) s = &x;
        }
        std::string ref =
            absl::StrCat(is.name, t.tag.find(':') != std::string::npos ? "@" : ":", t.tag);
        std::string phase = s ? TagPhaseName(s->phase) : "Waiting";
        int progress = s ? s->progress : 0;
        if (s && s->completed()) ++done;
        std::string line = absl::StrCat(Bar(progress), " ", progress, "% ", phase, " ", ref);
        if (s && s->phase == TagPhase::kFailed) absl::StrAppend(&line, ": ", s->message);
        lines.push_back(line);
        if (!tty && last_line[ref] != line) std::printf("%s\n", line.c_str());
        last_line[ref] = line;
      }
    }
    if (tty) {
      if (drawn > 0) std::printf("\033[%zuA", drawn);
      for (const std::string& l : lines) std::printf("\033[2K%s\n", l.c_str());
      drawn = lines.size();
    }
    std::fflush(stdout);
    if (done == total) break;
  }
  ImageStatuses final_status = puller.Statuses();
  int ok = 0, failed = 0;
  for (const auto& [image, tags] : final_status) {
    for (const TagStatus& t : tags) (t.phase == TagPhase::kSucceeded ? ok : failed)++;
  }
  std::printf(
      "summary: %d pulled, %d failed, %zu total in %s\n", ok, failed, total,
      absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(10))).c_str());
  for (const auto& [image, tags] : final_status) {
    for (const TagStatus& t : tags) {
      if (t.phase == TagPhase::kSucceeded) std::printf("  ok     %s\n", t.image_id.c_str());
      if (t.phase == TagPhase::kFailed) {
        std::printf("  FAILED %s:%s: %s\n", image.c_str(), t.tag.c_str(), t.message.c_str());
      }
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace kruise::daemon
