#include "common/flags.h"

#include <utility>

#include "CLI/CLI.hpp"

namespace kruise {

struct Flags::Impl {
  std::unique_ptr<CLI::App> owned;  // the top level owns its App; subcommands' Apps are CLI11's
  CLI::App* app = nullptr;
  std::vector<std::unique_ptr<Flags>> subcommands;
};

namespace {

CLI::Option* Opt(void* option) { return static_cast<CLI::Option*>(option); }

}  // namespace

Flags::Option& Flags::Option::Required() {
  Opt(option_)->required();
  return *this;
}
Flags::Option& Flags::Option::ShowDefault() {
  Opt(option_)->capture_default_str();
  return *this;
}
Flags::Option& Flags::Option::Positive() {
  Opt(option_)->check(CLI::PositiveNumber);
  return *this;
}
Flags::Option& Flags::Option::NonNegative() {
  Opt(option_)->check(CLI::NonNegativeNumber);
  return *this;
}
Flags::Option& Flags::Option::OneOf(std::vector<std::string> values) {
  Opt(option_)->check(CLI::IsMember(std::move(values)));
  return *this;
}

Flags::Flags(const std::string& description) : impl_(std::make_unique<Impl>()) {
  impl_->owned = std::make_unique<CLI::App>(description);
  impl_->app = impl_->owned.get();
}
Flags::Flags(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Flags::~Flags() = default;

Flags::Option Flags::Add(const std::string& names, std::string* value, const std::string& help) {
  return Option(impl_->app->add_option(names, *value, help));
}
Flags::Option Flags::Add(const std::string& names, int* value, const std::string& help) {
  return Option(impl_->app->add_option(names, *value, help));
}
Flags::Option Flags::Add(const std::string& names, int64_t* value, const std::string& help) {
  return Option(impl_->app->add_option(names, *value, help));
}
Flags::Option Flags::Add(const std::string& names, double* value, const std::string& help) {
  return Option(impl_->app->add_option(names, *value, help));
}
Flags::Option Flags::Add(const std::string& names, bool* value, const std::string& help) {
  return Option(impl_->app->add_option(names, *value, help));
}
Flags::Option Flags::Add(const std::string& names, std::vector<std::string>* value,
                         const std::string& help) {
  return Option(impl_->app->add_option(names, *value, help));
}
Flags::Option Flags::AddSwitch(const std::string& names, bool* value, const std::string& help) {
  return Option(impl_->app->add_flag(names, *value, help));
}

void Flags::SetHelpFlag(const std::string& names, const std::string& help) {
  impl_->app->set_help_flag(names, help);
}

Flags& Flags::Subcommand(const std::string& name, const std::string& help) {
  auto impl = std::make_unique<Impl>();
  impl->app = impl_->app->add_subcommand(name, help);
  impl_->subcommands.push_back(std::unique_ptr<Flags>(new Flags(std::move(impl))));
  return *impl_->subcommands.back();
}

bool Flags::Given() const { return impl_->app->parsed(); }

absl::Status Flags::Parse(int argc, const char* const* argv) {
  try {
    impl_->app->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return absl::CancelledError(impl_->app->help());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return absl::OkStatus();
}

std::optional<int> Flags::ParseOrExitCode(int argc, const char* const* argv) {
  try {
    impl_->app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return impl_->app->exit(e);
  }
  return std::nullopt;
}

}  // namespace kruise
