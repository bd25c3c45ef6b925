// ovl::Error and the check macros every folder uses.
//
// An Error carries the API that failed ("cuda", "cu", "nccl", "ovl"), the call or condition as written, the
// place (file:line) and the library's own message, so one line of what() says what went wrong and where.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ovl {

class Error : public std::runtime_error {
 public:
  Error(std::string api, std::string call, std::string file, int line, std::string message)
      : std::runtime_error(fmt::format("{}:{}: {} error: {}{}{}", file, line, api, message, call.empty() ? "" : " in ",
                                       call)),
        api_(std::move(api)),
        call_(std::move(call)),
        file_(std::move(file)),
        line_(line),
        message_(std::move(message)) {}

  const std::string& api() const noexcept { return api_; }
  const std::string& call() const noexcept { return call_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  // The library's own message without the location prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string api_;
  std::string call_;
  std::string file_;
  int line_;
  std::string message_;
};

namespace detail {
// Keeps only the file name: build paths say nothing to a user and differ between machines.
constexpr std::string_view basename(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

template <typename... Args>
[[noreturn]] void throw_error(const char* file, int line, std::string_view call, fmt::format_string<Args...> format,
                              Args&&... args) {
  throw Error("ovl", std::string(call), std::string(basename(file)), line,
              fmt::format(format, std::forward<Args>(args)...));
}
}  // namespace detail

}  // namespace ovl

// OVL_CHECK(cond, "format", args...): throws ovl::Error with the formatted message when cond is false.
// The message should name the bad value ("comm_sms = 12 is not a multiple of 8").
#define OVL_CHECK(cond, ...)                                                  \
  do {                                                                        \
    if (!(cond)) ::ovl::detail::throw_error(__FILE__, __LINE__, "", __VA_ARGS__); \
  } while (0)

// OVL_FAIL("format", args...): throws unconditionally.
#define OVL_FAIL(...) ::ovl::detail::throw_error(__FILE__, __LINE__, "", __VA_ARGS__)
