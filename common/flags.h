#pragma once

// Command-line flags for our executables: a narrow interface over CLI11.
//
// CLI11 (Debian's 2.1) is header-only and costs 8-14 s of compile time in every unit that uses it;
// behind this interface it is compiled once, in flags.cc (issue 12). Parsing, help text and error
// messages are CLI11's.
//
//   kruise::Flags flags("kruise-thing: what it does");
//   flags.Add("--addr", &addr, "Listen address").ShowDefault();
//   flags.Add("--workers", &workers, "Workers").Positive();
//   flags.AddSwitch("--always", &always, "Pull even when present");
//   kruise::Flags& check = flags.Subcommand("check", "Print what answered");
//   if (auto exit_code = flags.ParseOrExitCode(argc, argv)) return *exit_code;
//   if (check.Given()) ...

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kruise {

class Flags {
 public:
  // A flag just added; its methods add constraints and return *this for chaining.
  class Option {
   public:
    Option& Required();     // parsing fails when the flag is absent
    Option& ShowDefault();  // the help text shows the variable's value at Add() time
    Option& Positive();     // number > 0
    Option& NonNegative();  // number >= 0
    Option& OneOf(std::vector<std::string> values);

   private:
    friend class Flags;
    explicit Option(void* option) : option_(option) {}
    void* option_;  // CLI::Option*
  };

  explicit Flags(const std::string& description);
  ~Flags();
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // `names`: comma-separated ("-v,--v"); a name without a leading dash is positional. The value
  // is written when the flag is given; otherwise the variable keeps its default.
  Option Add(const std::string& names, std::string* value, const std::string& help);
  Option Add(const std::string& names, int* value, const std::string& help);
  Option Add(const std::string& names, int64_t* value, const std::string& help);
  Option Add(const std::string& names, double* value, const std::string& help);
  Option Add(const std::string& names, bool* value, const std::string& help);  // --x=true|false
  Option Add(const std::string& names, std::vector<std::string>* value, const std::string& help);
  // A switch: present -> true; "--x=false" -> false; a name "!--no-x" sets false.
  Option AddSwitch(const std::string& names, bool* value, const std::string& help);
  // Replaces the default -h,--help flag.
  void SetHelpFlag(const std::string& names, const std::string& help);

  // A subcommand; it lives as long as this object. Given() tells whether it was on the command
  // line.
  Flags& Subcommand(const std::string& name, const std::string& help);
  bool Given() const;

  // OK; CANCELLED with the help text for --help; INVALID_ARGUMENT with CLI11's message.
  absl::Status Parse(int argc, const char* const* argv);
  // For main(): nullopt to go on; otherwise the exit code, after printing the help (exit 0) to
  // stdout or the error and a hint to stderr (CLI11's exit codes, non-zero).
  std::optional<int> ParseOrExitCode(int argc, const char* const* argv);

 private:
  struct Impl;
  explicit Flags(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kruise
