#include "kube/object.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kruise::kube {

// ---- Safe lookups
// --------------------------------------------------------------------------------

const Json* FindPath(const Json& j, std::initializer_list<absl::string_view> path) {
  const Json* cur = &j;
  for (absl::string_view key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(key));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

const Json* Field(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

int64_t IntField(const Json& obj, const char* key, int64_t def) {
  const Json* v = Field(obj, key);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : def;
}

const Json* FindPointer(const Json& j, const std::string& pointer) {
  try {
    Json::json_pointer p(pointer);
    if (!j.contains(p)) return nullptr;
    return &j.at(p);
  } catch (const Json::exception&) {
    return nullptr;
  }
}

std::optional<std::string> GetString(const Json& j, std::initializer_list<absl::string_view> path) {
  const Json* v = FindPath(j, path);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::optional<int64_t> GetInt(const Json& j, std::initializer_list<absl::string_view> path) {
  const Json* v = FindPath(j, path);
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  return v->get<int64_t>();
}

std::optional<bool> GetBool(const Json& j, std::initializer_list<absl::string_view> path) {
  const Json* v = FindPath(j, path);
  if (v == nullptr || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

// ---- Metadata
// ------------------------------------------------------------------------------------

namespace {

std::string MetaString(const Json& obj, absl::string_view key) {
  return GetString(obj, {"metadata", key}).value_or("");
}

std::map<std::string, std::string> StringMap(const Json* m) {
  std::map<std::string, std::string> out;
  if (m == nullptr || !m->is_object()) return out;
  for (auto it = m->begin(); it != m->end(); ++it) {
    if (it.value().is_string()) out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

std::optional<absl::Time> MetaTime(const Json& obj, absl::string_view key) {
  std::optional<std::string> s = GetString(obj, {"metadata", key});
  if (!s) return std::nullopt;
  absl::StatusOr<absl::Time> t = ParseRfc3339(*s);
  if (!t.ok()) return std::nullopt;
  return *t;
}

}  // namespace

std::string Name(const Json& obj) { return MetaString(obj, "name"); }
std::string Namespace(const Json& obj) { return MetaString(obj, "namespace"); }
std::string Uid(const Json& obj) { return MetaString(obj, "uid"); }
std::string ResourceVersion(const Json& obj) { return MetaString(obj, "resourceVersion"); }
int64_t Generation(const Json& obj) { return GetInt(obj, {"metadata", "generation"}).value_or(0); }

std::string NamespacedName(const Json& obj) {
  std::string ns = Namespace(obj);
  return ns.empty() ? Name(obj) : absl::StrCat(ns, "/", Name(obj));
}

std::map<std::string, std::string> Labels(const Json& obj) {
  return StringMap(FindPath(obj, {"metadata", "labels"}));
}
std::map<std::string, std::string> Annotations(const Json& obj) {
  return StringMap(FindPath(obj, {"metadata", "annotations"}));
}
std::optional<std::string> Label(const Json& obj, const std::string& key) {
  return GetString(obj, {"metadata", "labels", key});
}
std::optional<std::string> Annotation(const Json& obj, const std::string& key) {
  return GetString(obj, {"metadata", "annotations", key});
}

Json OwnerReference::ToJson() const {
  Json j = {{"apiVersion", api_version}, {"kind", kind}, {"name", name}, {"uid", uid}};
  if (controller) j["controller"] = true;
  if (block_owner_deletion) j["blockOwnerDeletion"] = true;
  return j;
}

std::vector<OwnerReference> OwnerReferences(const Json& obj) {
  std::vector<OwnerReference> out;
  const Json* refs = FindPath(obj, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return out;
  for (const Json& r : *refs) {
    OwnerReference o;
    auto api = GetString(r, {"apiVersion"});
    auto kind = GetString(r, {"kind"});
    auto name = GetString(r, {"name"});
    auto uid = GetString(r, {"uid"});
    if (!api || !kind || !name || !uid) continue;
    o.api_version = *api;
    o.kind = *kind;
    o.name = *name;
    o.uid = *uid;
    o.controller = GetBool(r, {"controller"}).value_or(false);
    o.block_owner_deletion = GetBool(r, {"blockOwnerDeletion"}).value_or(false);
    out.push_back(std::move(o));
  }
  return out;
}

std::optional<OwnerReference> ControllerOf(const Json& obj) {
  for (OwnerReference& r : OwnerReferences(obj)) {
    if (r.controller) return std::move(r);
  }
  return std::nullopt;
}

std::vector<std::string> Finalizers(const Json& obj) {
  std::vector<std::string> out;
  const Json* f = FindPath(obj, {"metadata", "finalizers"});
  if (f == nullptr || !f->is_array()) return out;
  for (const Json& v : *f) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

bool HasFinalizer(const Json& obj, const std::string& finalizer) {
  std::vector<std::string> f = Finalizers(obj);
  return std::find(f.begin(), f.end(), finalizer) != f.end();
}

std::optional<absl::Time> CreationTimestamp(const Json& obj) {
  return MetaTime(obj, "creationTimestamp");
}
std::optional<absl::Time> DeletionTimestamp(const Json& obj) {
  return MetaTime(obj, "deletionTimestamp");
}
bool IsBeingDeleted(const Json& obj) {
  const Json* d = FindPath(obj, {"metadata", "deletionTimestamp"});
  return d != nullptr && !d->is_null();
}

// ---- Times
// ---------------------------------------------------------------------------------------

absl::StatusOr<absl::Time> ParseRfc3339(absl::string_view s) {
  absl::Time t;
  std::string err;
  if (s.empty() || !absl::ParseTime(absl::RFC3339_full, std::string(s), &t, &err)) {
    return absl::InvalidArgumentError(absl::StrCat("not an RFC 3339 time: \"", s, "\" ", err));
  }
  return t;
}

std::string FormatRfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string FormatRfc3339Micro(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

std::string FormatRfc3339Nano(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

// ---- IntOrString
// ---------------------------------------------------------------------------------

absl::StatusOr<int> GetScaledValueFromIntOrPercent(const Json& v, int total, bool round_up) {
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("IntOrString value ", i, " out of range"));
    }
    return static_cast<int>(i);
  }
  if (!v.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid value for IntOrString: ", v.dump(), " (need an integer or \"N%\")"));
  }
  const std::string s = v.get<std::string>();
  // Like Go's strconv.Atoi: an optional sign and digits only (no spaces), then '%'.
  absl::string_view digits = absl::string_view(s).substr(0, s.empty() ? 0 : s.size() - 1);
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  const bool well_formed = absl::EndsWith(s, "%") && !digits.empty() &&
                           std::all_of(digits.begin(), digits.end(), [](char c) {
                             return absl::ascii_isdigit(static_cast<unsigned char>(c));
                           });
  int percent = 0;
  if (!well_formed || !absl::SimpleAtoi(absl::string_view(s).substr(0, s.size() - 1), &percent)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid value for IntOrString: \"", s, "\" is not a percentage"));
  }
  // Same arithmetic as Kubernetes (float64, then ceil/floor). Go's int is 64 bits; ours is 32, so
  // a result out of its range ("2147483647%" of 1000) saturates rather than overflowing the
  // conversion, which is undefined behaviour (found by test/fuzz/kube_time.cc).
  const double scaled = static_cast<double>(percent) * static_cast<double>(total) / 100;
  const double rounded = round_up ? std::ceil(scaled) : std::floor(scaled);
  if (rounded >= static_cast<double>(std::numeric_limits<int>::max())) {
    return std::numeric_limits<int>::max();
  }
  if (rounded <= static_cast<double>(std::numeric_limits<int>::min())) {
    return std::numeric_limits<int>::min();
  }
  return static_cast<int>(rounded);
}

// ---- Label selectors
// -----------------------------------------------------------------------------

namespace {

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?, at most 63 characters; empty allowed when
// `allow_empty`.
bool IsLabelToken(absl::string_view s, bool allow_empty) {
  if (s.empty()) return allow_empty;
  if (s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

absl::Status ValidateKey(absl::string_view key) {
  absl::string_view name = key;
  if (size_t slash = key.find('/'); slash != absl::string_view::npos) {
    absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    bool ok = !prefix.empty() && prefix.size() <= 253;
    for (char c : prefix) {
      if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
          !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '-' && c != '.') {
        ok = false;
      }
    }
    if (!ok)
      return absl::InvalidArgumentError(absl::StrCat("invalid label key prefix in \"", key, "\""));
  }
  if (!IsLabelToken(name, false)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid label key \"", key, "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view v) {
  if (!IsLabelToken(v, true)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid label value \"", v, "\""));
  }
  return absl::OkStatus();
}

// Tokens of the string form.
enum class Tok { kId, kComma, kOpen, kClose, kEq, kDoubleEq, kNotEq, kBang, kGt, kLt, kEnd };

struct Token {
  Tok kind;
  std::string text;
};

bool IsSpecial(char c) {
  return c == ',' || c == '(' || c == ')' || c == '=' || c == '!' || c == '<' || c == '>' ||
         absl::ascii_isspace(static_cast<unsigned char>(c));
}

absl::StatusOr<std::vector<Token>> Lex(absl::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == ',') {
      out.push_back({Tok::kComma, ","}), ++i;
    } else if (c == '(') {
      out.push_back({Tok::kOpen, "("}), ++i;
    } else if (c == ')') {
      out.push_back({Tok::kClose, ")"}), ++i;
    } else if (c == '>') {
      out.push_back({Tok::kGt, ">"}), ++i;
    } else if (c == '<') {
      out.push_back({Tok::kLt, "<"}), ++i;
    } else if (c == '=') {
      if (i + 1 < s.size() && s[i + 1] == '=') {
        out.push_back({Tok::kDoubleEq, "=="}), i += 2;
      } else {
        out.push_back({Tok::kEq, "="}), ++i;
      }
    } else if (c == '!') {
      if (i + 1 < s.size() && s[i + 1] == '=') {
        out.push_back({Tok::kNotEq, "!="}), i += 2;
      } else {
        out.push_back({Tok::kBang, "!"}), ++i;
      }
    } else {
      size_t j = i;
      while (j < s.size() && !IsSpecial(s[j])) ++j;
      out.push_back({Tok::kId, std::string(s.substr(i, j - i))});
      i = j;
    }
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

class SelectorParser {
 public:
  SelectorParser(std::vector<Token> toks, absl::string_view input)
      : toks_(std::move(toks)), input_(input) {}

  absl::StatusOr<std::vector<LabelSelector::Requirement>> Parse() {
    std::vector<LabelSelector::Requirement> out;
    if (Peek().kind == Tok::kEnd) return out;
    for (;;) {
      ASSIGN_OR_RETURN(LabelSelector::Requirement r, ParseRequirement());
      out.push_back(std::move(r));
      Token t = Next();
      if (t.kind == Tok::kEnd) return out;
      if (t.kind != Tok::kComma) return Error(absl::StrCat("expected ',' but got '", t.text, "'"));
    }
  }

 private:
  const Token& Peek() const { return toks_[pos_]; }
  Token Next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid label selector \"", input_, "\": ", what));
  }

  absl::StatusOr<LabelSelector::Requirement> ParseRequirement() {
    LabelSelector::Requirement r;
    if (Peek().kind == Tok::kBang) {
      Next();
      Token key = Next();
      if (key.kind != Tok::kId) return Error("expected a key after '!'");
      r.key = key.text;
      r.op = LabelSelector::Op::kDoesNotExist;
      return r;
    }
    Token key = Next();
    if (key.kind != Tok::kId) return Error(absl::StrCat("expected a key, got '", key.text, "'"));
    r.key = key.text;
    Token op = Peek();
    switch (op.kind) {
      case Tok::kComma:
      case Tok::kEnd:
        r.op = LabelSelector::Op::kExists;
        return r;
      case Tok::kEq:
      case Tok::kDoubleEq:
      case Tok::kNotEq: {
        Next();
        r.op = op.kind == Tok::kNotEq ? LabelSelector::Op::kNotEquals : LabelSelector::Op::kEquals;
        // "a=" selects the empty value.
        if (Peek().kind == Tok::kId) {
          r.values.push_back(Next().text);
        } else if (Peek().kind == Tok::kComma || Peek().kind == Tok::kEnd) {
          r.values.push_back("");
        } else {
          return Error(absl::StrCat("expected a value after '", op.text, "'"));
        }
        return r;
      }
      case Tok::kGt:
      case Tok::kLt: {
        Next();
        r.op = op.kind == Tok::kGt ? LabelSelector::Op::kGt : LabelSelector::Op::kLt;
        Token v = Next();
        int64_t n;
        if (v.kind != Tok::kId || !absl::SimpleAtoi(v.text, &n)) {
          return Error(absl::StrCat("'", op.text, "' needs an integer value"));
        }
        r.values.push_back(v.text);
        return r;
      }
      case Tok::kId: {
        Next();
        if (op.text == "in") {
          r.op = LabelSelector::Op::kIn;
        } else if (op.text == "notin") {
          r.op = LabelSelector::Op::kNotIn;
        } else {
          return Error(absl::StrCat("unknown operator '", op.text, "'"));
        }
        if (Next().kind != Tok::kOpen) return Error(absl::StrCat("expected '(' after ", op.text));
        // Values separated by commas; an empty slot is the empty value.
        for (;;) {
          if (Peek().kind == Tok::kId) {
            r.values.push_back(Next().text);
          } else {
            r.values.push_back("");
          }
          Token t = Next();
          if (t.kind == Tok::kClose) break;
          if (t.kind != Tok::kComma) return Error("expected ',' or ')' in a value set");
        }
        return r;
      }
      default:
        return Error(absl::StrCat("unexpected '", op.text, "' after key ", r.key));
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  absl::string_view input_;
};

const char* OpName(LabelSelector::Op op) {
  switch (op) {
    case LabelSelector::Op::kIn:
      return "in";
    case LabelSelector::Op::kNotIn:
      return "notin";
    default:
      return "";
  }
}

}  // namespace

absl::Status LabelSelector::Add(Requirement r) {
  RETURN_IF_ERROR(ValidateKey(r.key));
  std::sort(r.values.begin(), r.values.end());
  r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
  switch (r.op) {
    case Op::kIn:
    case Op::kNotIn:
      if (r.values.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("label selector: operator ", OpName(r.op),
                                                       " on \"", r.key,
                                                       "\" needs at least one value"));
      }
      break;
    case Op::kEquals:
    case Op::kNotEquals:
    case Op::kGt:
    case Op::kLt:
      if (r.values.size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("label selector: \"", r.key, "\" needs exactly one value"));
      }
      break;
    case Op::kExists:
    case Op::kDoesNotExist:
      if (!r.values.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("label selector: Exists/DoesNotExist on \"", r.key, "\" takes no values"));
      }
      break;
  }
  if (r.op != Op::kGt && r.op != Op::kLt) {
    for (const std::string& v : r.values) RETURN_IF_ERROR(ValidateValue(v));
  }
  requirements_.push_back(std::move(r));
  return absl::OkStatus();
}

absl::StatusOr<LabelSelector> LabelSelector::FromJson(const Json& selector) {
  if (selector.is_null()) return Nothing();
  if (!selector.is_object()) {
    return absl::InvalidArgumentError("label selector: expected an object");
  }
  LabelSelector out(false);
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) return absl::InvalidArgumentError("matchLabels: expected an object");
    for (auto it = ml->begin(); it != ml->end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("matchLabels[", it.key(), "]: expected a string"));
      }
      RETURN_IF_ERROR(out.Add({it.key(), Op::kIn, {it.value().get<std::string>()}}));
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && !me->is_null()) {
    if (!me->is_array()) return absl::InvalidArgumentError("matchExpressions: expected a list");
    for (const Json& e : *me) {
      std::optional<std::string> key = GetString(e, {"key"});
      std::optional<std::string> op = GetString(e, {"operator"});
      if (!key || !op) {
        return absl::InvalidArgumentError("matchExpressions: each entry needs key and operator");
      }
      Requirement r{*key, Op::kIn, {}};
      if (*op == "In") {
        r.op = Op::kIn;
      } else if (*op == "NotIn") {
        r.op = Op::kNotIn;
      } else if (*op == "Exists") {
        r.op = Op::kExists;
      } else if (*op == "DoesNotExist") {
        r.op = Op::kDoesNotExist;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("matchExpressions: unknown operator \"", *op, "\""));
      }
      if (auto vs = e.find("values"); vs != e.end() && !vs->is_null()) {
        if (!vs->is_array())
          return absl::InvalidArgumentError("matchExpressions: values not a list");
        for (const Json& v : *vs) {
          if (!v.is_string())
            return absl::InvalidArgumentError("matchExpressions: non-string value");
          r.values.push_back(v.get<std::string>());
        }
      }
      RETURN_IF_ERROR(out.Add(std::move(r)));
    }
  }
  std::stable_sort(out.requirements_.begin(), out.requirements_.end(),
                   [](const Requirement& a, const Requirement& b) { return a.key < b.key; });
  return out;
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view s) {
  ASSIGN_OR_RETURN(std::vector<Token> toks, Lex(s));
  SelectorParser p(std::move(toks), s);
  ASSIGN_OR_RETURN(std::vector<Requirement> reqs, p.Parse());
  LabelSelector out(false);
  for (Requirement& r : reqs) {
    absl::Status st = out.Add(std::move(r));
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid label selector \"", s, "\": ", st.message()));
    }
  }
  std::stable_sort(out.requirements_.begin(), out.requirements_.end(),
                   [](const Requirement& a, const Requirement& b) { return a.key < b.key; });
  return out;
}

Json SemanticNormalized(const Json& v) {
  if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
      Json n = SemanticNormalized(*it);
      if (n.is_null() || (n.is_object() && n.empty()) || (n.is_array() && n.empty())) continue;
      out[it.key()] = std::move(n);
    }
    return out;
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) out.push_back(SemanticNormalized(e));
    return out;
  }
  return v;
}

const LabelSelector::Requirement* LabelSelector::RequiredLabel() const {
  const Requirement* best = nullptr;
  for (const Requirement& r : requirements_) {
    if (r.op != Op::kIn && r.op != Op::kEquals) continue;
    if (best == nullptr || r.values.size() < best->values.size()) best = &r;
  }
  return best;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  if (nothing_) return false;
  for (const Requirement& r : requirements_) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    auto in_values = [&] {
      return has && std::binary_search(r.values.begin(), r.values.end(), it->second);
    };
    bool ok = false;
    switch (r.op) {
      case Op::kIn:
      case Op::kEquals:
        ok = in_values();
        break;
      case Op::kNotIn:
      case Op::kNotEquals:
        ok = !in_values();
        break;
      case Op::kExists:
        ok = has;
        break;
      case Op::kDoesNotExist:
        ok = !has;
        break;
      case Op::kGt:
      case Op::kLt: {
        int64_t have, want;
        if (!has || !absl::SimpleAtoi(it->second, &have) || !absl::SimpleAtoi(r.values[0], &want)) {
          ok = false;
        } else {
          ok = r.op == Op::kGt ? have > want : have < want;
        }
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

std::string LabelSelector::ToString() const {
  std::vector<std::string> parts;
  for (const Requirement& r : requirements_) {
    switch (r.op) {
      case Op::kIn:
        if (r.values.size() == 1) {
          parts.push_back(absl::StrCat(r.key, "=", r.values[0]));
        } else {
          parts.push_back(absl::StrCat(r.key, " in (", absl::StrJoin(r.values, ","), ")"));
        }
        break;
      case Op::kNotIn:
        parts.push_back(absl::StrCat(r.key, " notin (", absl::StrJoin(r.values, ","), ")"));
        break;
      case Op::kEquals:
        parts.push_back(absl::StrCat(r.key, "=", r.values[0]));
        break;
      case Op::kNotEquals:
        parts.push_back(absl::StrCat(r.key, "!=", r.values[0]));
        break;
      case Op::kExists:
        parts.push_back(r.key);
        break;
      case Op::kDoesNotExist:
        parts.push_back(absl::StrCat("!", r.key));
        break;
      case Op::kGt:
        parts.push_back(absl::StrCat(r.key, ">", r.values[0]));
        break;
      case Op::kLt:
        parts.push_back(absl::StrCat(r.key, "<", r.values[0]));
        break;
    }
  }
  return absl::StrJoin(parts, ",");
}

Json StatusPatchOps(const Json& obj, const Json& next, const std::vector<std::string>& removable) {
  Json ops = Json::array(
      {{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", ResourceVersion(obj)}}});
  const Json* old = Field(obj, "status");
  if (old == nullptr || !old->is_object()) {
    ops.push_back({{"op", "add"}, {"path", "/status"}, {"value", next}});
    return ops;
  }
  for (const auto& [key, value] : next.items()) {
    ops.push_back({{"op", "add"}, {"path", absl::StrCat("/status/", key)}, {"value", value}});
  }
  for (const std::string& key : removable) {
    if (old->contains(key) && !next.contains(key)) {
      ops.push_back({{"op", "remove"}, {"path", absl::StrCat("/status/", key)}});
    }
  }
  return ops;
}

absl::StatusOr<Json> PatchIfUnchanged(KubeClient* client, const Resource& resource, const Json& obj,
                                      const Json& ops, const std::string& subresource) {
  auto result =
      client->Patch(resource, Namespace(obj), Name(obj), PatchType::kJson, ops, subresource);
  if (!result.ok() && result.status().code() == absl::StatusCode::kInvalidArgument) {
    auto now = client->Get(resource, Namespace(obj), Name(obj));
    if (now.ok() && ResourceVersion(*now) != ResourceVersion(obj)) {
      return absl::AbortedError(
          absl::StrCat(resource.kind, " ", Name(obj), " changed since the cache saw it; retrying"));
    }
  }
  return result;
}

}  // namespace kruise::kube
