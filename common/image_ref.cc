#include "common/image_ref.h"

#include <cctype>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kruise {
namespace {

constexpr absl::string_view kDefaultRegistry = "docker.io";
constexpr absl::string_view kLegacyDefaultRegistry = "index.docker.io";
constexpr absl::string_view kOfficialPrefix = "library/";
constexpr absl::string_view kDefaultTag = "latest";
constexpr size_t kMaxNameLength = 255;
constexpr size_t kMaxTagLength = 128;

absl::Status Invalid(absl::string_view ref, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid image reference \"", ref, "\": ", why));
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsWordChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsHex(char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }
bool IsDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := "." | "_" | "__" | "-"+
absl::Status ValidatePathComponent(absl::string_view ref, absl::string_view comp) {
  if (comp.empty()) {
    return Invalid(ref, "empty path component in repository name");
  }
  for (char c : comp) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) {
      return Invalid(ref,
                     absl::StrCat("repository name must be lowercase (component \"", comp, "\")"));
    }
  }
  size_t i = 0;
  while (i < comp.size()) {
    size_t run = i;
    while (i < comp.size() && IsLowerAlnum(comp[i])) ++i;
    if (i == run) {
      return Invalid(ref, absl::StrCat("path component \"", comp,
                                       "\" must start and end with a lowercase letter or digit "
                                       "and use only '.', '_', '__' or '-' as separators"));
    }
    if (i == comp.size()) break;
    size_t sep = i;
    while (i < comp.size() && !IsLowerAlnum(comp[i])) ++i;
    absl::string_view s = comp.substr(sep, i - sep);
    bool dashes = s.find_first_not_of('-') == absl::string_view::npos;
    if (!(s == "." || s == "_" || s == "__" || dashes)) {
      return Invalid(
          ref, absl::StrCat("invalid separator \"", s, "\" in path component \"", comp, "\""));
    }
    if (i == comp.size()) {
      return Invalid(ref,
                     absl::StrCat("path component \"", comp, "\" must not end with a separator"));
    }
  }
  return absl::OkStatus();
}

// domain := host [":" port]; host := label ("." label)* | "[" ipv6 "]";
// label := [A-Za-z0-9] | [A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]
absl::Status ValidateRegistry(absl::string_view ref, absl::string_view domain) {
  absl::string_view host = domain;
  absl::string_view port;
  if (absl::StartsWith(domain, "[")) {
    size_t close = domain.find(']');
    if (close == absl::string_view::npos) {
      return Invalid(ref, absl::StrCat("registry \"", domain, "\": unterminated IPv6 address"));
    }
    absl::string_view v6 = domain.substr(1, close - 1);
    if (v6.empty() || v6.find_first_not_of("0123456789abcdefABCDEF:.") != absl::string_view::npos) {
      return Invalid(ref, absl::StrCat("registry \"", domain, "\": invalid IPv6 address"));
    }
    absl::string_view rest = domain.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') {
        return Invalid(ref, absl::StrCat("registry \"", domain, "\": junk after IPv6 address"));
      }
      port = rest.substr(1);
      if (!IsDigits(port)) {
        return Invalid(ref, absl::StrCat("registry \"", domain, "\": port must be a number"));
      }
    }
    return absl::OkStatus();
  }
  size_t colon = domain.find(':');
  if (colon != absl::string_view::npos) {
    host = domain.substr(0, colon);
    port = domain.substr(colon + 1);
    if (!IsDigits(port)) {
      return Invalid(ref, absl::StrCat("registry \"", domain, "\": port must be a number"));
    }
  }
  if (host.empty()) {
    return Invalid(ref, absl::StrCat("registry \"", domain, "\": empty host"));
  }
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty()) {
      return Invalid(ref, absl::StrCat("registry \"", domain, "\": empty host label"));
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') {
        return Invalid(ref, absl::StrCat("registry \"", domain, "\": invalid character '",
                                         std::string(1, c), "' in host"));
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return Invalid(ref, absl::StrCat("registry \"", domain,
                                       "\": host label must not start or end with '-'"));
    }
  }
  return absl::OkStatus();
}

// tag := [\w][\w.-]{0,127}
absl::Status ValidateTag(absl::string_view ref, absl::string_view tag) {
  if (tag.empty()) {
    return Invalid(ref, "empty tag after ':'");
  }
  if (tag.size() > kMaxTagLength) {
    return Invalid(ref, absl::StrCat("tag longer than ", kMaxTagLength, " characters"));
  }
  if (!IsWordChar(tag[0])) {
    return Invalid(ref, absl::StrCat("tag \"", tag, "\" must start with a letter, digit or '_'"));
  }
  for (char c : tag) {
    if (!IsWordChar(c) && c != '.' && c != '-') {
      return Invalid(ref, absl::StrCat("tag \"", tag, "\" contains invalid character '",
                                       std::string(1, c), "'"));
    }
  }
  return absl::OkStatus();
}

// digest := algorithm ":" hex; algorithm := [A-Za-z][A-Za-z0-9]* ([+._-][A-Za-z][A-Za-z0-9]*)*;
// hex := [0-9a-fA-F]{32,}; sha256 requires exactly 64 lowercase hex, sha512 128.
absl::Status ValidateDigest(absl::string_view ref, absl::string_view digest) {
  if (digest.empty()) {
    return Invalid(ref, "empty digest after '@'");
  }
  size_t colon = digest.find(':');
  if (colon == absl::string_view::npos) {
    return Invalid(ref, absl::StrCat("digest \"", digest, "\" must be <algorithm>:<hex>"));
  }
  absl::string_view algo = digest.substr(0, colon);
  absl::string_view hex = digest.substr(colon + 1);
  if (algo.empty()) {
    return Invalid(ref, "digest algorithm is empty");
  }
  bool expect_alpha = true;
  for (char c : algo) {
    if (expect_alpha) {
      if (!absl::ascii_isalpha(static_cast<unsigned char>(c))) {
        return Invalid(ref, absl::StrCat("invalid digest algorithm \"", algo, "\""));
      }
      expect_alpha = false;
    } else if (c == '+' || c == '.' || c == '_' || c == '-') {
      expect_alpha = true;
    } else if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      return Invalid(ref, absl::StrCat("invalid digest algorithm \"", algo, "\""));
    }
  }
  if (expect_alpha) {
    return Invalid(ref, absl::StrCat("invalid digest algorithm \"", algo, "\""));
  }
  size_t want = 0;
  if (algo == "sha256") want = 64;
  if (algo == "sha512") want = 128;
  if (want != 0) {
    if (hex.size() != want) {
      return Invalid(
          ref, absl::StrCat(algo, " digest must have ", want, " hex characters, got ", hex.size()));
    }
    for (char c : hex) {
      if (!IsLowerHex(c)) {
        return Invalid(ref, absl::StrCat(algo, " digest must be lowercase hex"));
      }
    }
    return absl::OkStatus();
  }
  if (hex.size() < 32) {
    return Invalid(ref, "digest hex must have at least 32 characters");
  }
  for (char c : hex) {
    if (!IsHex(c)) {
      return Invalid(ref, "digest must be hex");
    }
  }
  return absl::OkStatus();
}

bool Is64Hex(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

// The first component of a name is its registry when it has '.' or ':', is "localhost", is a
// bracketed IPv6 address or has uppercase letters (which a repository path cannot).
bool LooksLikeRegistry(absl::string_view first) {
  return absl::StrContains(first, '.') || absl::StrContains(first, ':') || first == "localhost" ||
         absl::StartsWith(first, "[") || absl::AsciiStrToLower(first) != first;
}

}  // namespace

std::string ImageReference::RepositoryWithRegistry() const {
  return absl::StrCat(registry, "/", repository);
}

std::string ImageReference::Normalized() const {
  std::string out = RepositoryWithRegistry();
  if (!tag.empty()) absl::StrAppend(&out, ":", tag);
  if (!digest.empty()) absl::StrAppend(&out, "@", digest);
  return out;
}

std::string ImageReference::Familiar() const {
  std::string out;
  if (registry == kDefaultRegistry) {
    absl::string_view repo = repository;
    // "library/<64 hex>" keeps its "library/": the bare name would read as an image id.
    if (absl::StartsWith(repo, kOfficialPrefix) &&
        repo.substr(kOfficialPrefix.size()).find('/') == absl::string_view::npos &&
        !Is64Hex(repo.substr(kOfficialPrefix.size()))) {
      repo.remove_prefix(kOfficialPrefix.size());
    }
    // "docker.io/localhost/app" or "docker.io/a.b/app" without its registry would read as the
    // registry "localhost" or "a.b": keep "docker.io/" so the short form names the same image
    // (Docker's FamiliarString drops it anyway; found by test/fuzz/image_reference.cc).
    const size_t slash = repo.find('/');
    out = slash != absl::string_view::npos && LooksLikeRegistry(repo.substr(0, slash))
              ? RepositoryWithRegistry()
              : std::string(repo);
  } else {
    out = RepositoryWithRegistry();
  }
  if (!tag.empty()) absl::StrAppend(&out, ":", tag);
  if (!digest.empty()) absl::StrAppend(&out, "@", digest);
  return out;
}

absl::StatusOr<ImageReference> ParseImageReference(absl::string_view ref) {
  if (ref.empty()) {
    return absl::InvalidArgumentError("invalid image reference: empty");
  }
  for (char c : ref) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return Invalid(ref, "contains whitespace");
    }
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return Invalid(ref, "contains a non-printable or non-ASCII character");
    }
  }
  ImageReference out;
  absl::string_view rest = ref;
  size_t at = rest.find('@');
  if (at != absl::string_view::npos) {
    absl::string_view digest = rest.substr(at + 1);
    if (digest.find('@') != absl::string_view::npos) {
      return Invalid(ref, "more than one '@'");
    }
    if (absl::Status st = ValidateDigest(ref, digest); !st.ok()) return st;
    out.digest = std::string(digest);
    rest = rest.substr(0, at);
  }
  size_t last_slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos &&
      (last_slash == absl::string_view::npos || colon > last_slash)) {
    absl::string_view tag = rest.substr(colon + 1);
    if (absl::Status st = ValidateTag(ref, tag); !st.ok()) return st;
    out.tag = std::string(tag);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) {
    return Invalid(ref, "empty repository name");
  }

  // Registry: the first component when it looks like a host (LooksLikeRegistry).
  absl::string_view path = rest;
  out.registry = std::string(kDefaultRegistry);
  size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    absl::string_view first = rest.substr(0, slash);
    if (LooksLikeRegistry(first)) {
      if (absl::Status st = ValidateRegistry(ref, first); !st.ok()) return st;
      out.registry = std::string(first);
      path = rest.substr(slash + 1);
    }
  }
  if (out.registry == kLegacyDefaultRegistry) {
    out.registry = std::string(kDefaultRegistry);
  }
  if (path.empty()) {
    return Invalid(ref, "empty repository name");
  }
  for (absl::string_view comp : absl::StrSplit(path, '/')) {
    if (absl::Status st = ValidatePathComponent(ref, comp); !st.ok()) return st;
  }
  if (out.registry == kDefaultRegistry && Is64Hex(path)) {
    return Invalid(ref, "a 64-character hex string is an image id, not a repository name");
  }
  if (out.registry == kDefaultRegistry && path.find('/') == absl::string_view::npos) {
    out.repository = absl::StrCat(kOfficialPrefix, path);
  } else {
    out.repository = std::string(path);
  }
  if (out.RepositoryWithRegistry().size() > kMaxNameLength) {
    return Invalid(ref,
                   absl::StrCat("repository name longer than ", kMaxNameLength, " characters"));
  }
  if (out.tag.empty() && out.digest.empty()) {
    out.tag = std::string(kDefaultTag);
  }
  return out;
}

}  // namespace kruise
