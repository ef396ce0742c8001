#include "test/fakes/apiserver/selectors.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kruise::testing::apiserver {
namespace {

bool IsKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         c == '/';
}
bool IsValueChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// Splits on commas that are not inside parentheses.
absl::StatusOr<std::vector<std::string>> SplitTopLevel(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return absl::InvalidArgumentError("unbalanced ')' in selector");
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (depth != 0) return absl::InvalidArgumentError("unbalanced '(' in selector");
  out.push_back(cur);
  return out;
}

absl::Status CheckValue(absl::string_view v) {
  for (char c : v) {
    if (!IsValueChar(c)) return absl::InvalidArgumentError(absl::StrCat("invalid value '", v, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LabelRequirement> ParseRequirement(absl::string_view term) {
  LabelRequirement req;
  absl::string_view s = absl::StripAsciiWhitespace(term);
  if (s.empty()) return absl::InvalidArgumentError("empty label selector term");
  bool negated_exists = absl::ConsumePrefix(&s, "!");
  s = absl::StripLeadingAsciiWhitespace(s);
  size_t i = 0;
  while (i < s.size() && IsKeyChar(s[i])) ++i;
  req.key = std::string(s.substr(0, i));
  if (req.key.empty())
    return absl::InvalidArgumentError(absl::StrCat("missing key in '", term, "'"));
  absl::string_view rest = absl::StripAsciiWhitespace(s.substr(i));
  if (negated_exists) {
    if (!rest.empty()) return absl::InvalidArgumentError(absl::StrCat("bad term '", term, "'"));
    req.op = LabelRequirement::Op::kNotExists;
    return req;
  }
  if (rest.empty()) {
    req.op = LabelRequirement::Op::kExists;
    return req;
  }
  auto single = [&](absl::string_view v,
                    LabelRequirement::Op op) -> absl::StatusOr<LabelRequirement> {
    v = absl::StripAsciiWhitespace(v);
    absl::Status st = CheckValue(v);
    if (!st.ok()) return st;
    req.op = op;
    req.values.insert(std::string(v));
    return req;
  };
  if (absl::ConsumePrefix(&rest, "!=")) return single(rest, LabelRequirement::Op::kNotEquals);
  if (absl::ConsumePrefix(&rest, "==")) return single(rest, LabelRequirement::Op::kEquals);
  if (absl::ConsumePrefix(&rest, "=")) return single(rest, LabelRequirement::Op::kEquals);
  LabelRequirement::Op op;
  if (absl::ConsumePrefix(&rest, "notin")) {
    op = LabelRequirement::Op::kNotIn;
  } else if (absl::ConsumePrefix(&rest, "in")) {
    op = LabelRequirement::Op::kIn;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown operator in '", term, "'"));
  }
  rest = absl::StripAsciiWhitespace(rest);
  if (!absl::ConsumePrefix(&rest, "(") || !absl::ConsumeSuffix(&rest, ")")) {
    return absl::InvalidArgumentError(absl::StrCat("expected '(values)' in '", term, "'"));
  }
  req.op = op;
  for (absl::string_view v : absl::StrSplit(rest, ',')) {
    v = absl::StripAsciiWhitespace(v);
    absl::Status st = CheckValue(v);
    if (!st.ok()) return st;
    req.values.insert(std::string(v));
  }
  return req;
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(const std::string& text) {
  LabelSelector sel;
  if (absl::StripAsciiWhitespace(text).empty()) return sel;
  auto terms = SplitTopLevel(text);
  if (!terms.ok()) return terms.status();
  for (const std::string& t : *terms) {
    auto req = ParseRequirement(t);
    if (!req.ok()) return req.status();
    sel.reqs_.push_back(*std::move(req));
  }
  return sel;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const LabelRequirement& r : reqs_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    switch (r.op) {
      case LabelRequirement::Op::kEquals:
      case LabelRequirement::Op::kIn:
        if (!has || r.values.count(it->second) == 0) return false;
        break;
      case LabelRequirement::Op::kNotEquals:
      case LabelRequirement::Op::kNotIn:
        if (has && r.values.count(it->second) != 0) return false;
        break;
      case LabelRequirement::Op::kExists:
        if (!has) return false;
        break;
      case LabelRequirement::Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

absl::StatusOr<FieldSelector> FieldSelector::Parse(const std::string& text) {
  FieldSelector sel;
  if (absl::StripAsciiWhitespace(text).empty()) return sel;
  for (absl::string_view term : absl::StrSplit(text, ',')) {
    term = absl::StripAsciiWhitespace(term);
    FieldRequirement req;
    size_t pos;
    size_t op_len;
    if ((pos = term.find("!=")) != absl::string_view::npos) {
      req.negate = true;
      op_len = 2;
    } else if ((pos = term.find("==")) != absl::string_view::npos) {
      op_len = 2;
    } else if ((pos = term.find('=')) != absl::string_view::npos) {
      op_len = 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("invalid field selector term '", term, "'"));
    }
    req.path = std::string(absl::StripAsciiWhitespace(term.substr(0, pos)));
    req.value = std::string(absl::StripAsciiWhitespace(term.substr(pos + op_len)));
    if (req.path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("missing field in '", term, "'"));
    }
    sel.reqs_.push_back(std::move(req));
  }
  return sel;
}

bool FieldSelector::Matches(const std::function<std::string(const std::string&)>& get) const {
  for (const FieldRequirement& r : reqs_) {
    bool eq = get(r.path) == r.value;
    if (eq == r.negate) return false;
  }
  return true;
}

}  // namespace kruise::testing::apiserver
