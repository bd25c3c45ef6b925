// Mutations of a valid JSON file's text for the loader fuzz tests (tests/sim/test_fuzz_loaders.cpp,
// tests/cli/test_fuzz_cli.cpp): what a damaged, hand-edited or hostile file looks like. Deterministic for a seed.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace ovl::test {

enum class TextMutation {
  kByteFlip,      // one byte XOR a random value (may break UTF-8)
  kTruncate,      // the file cut short
  kDelete,        // a run of bytes removed
  kDuplicateRun,  // a run of bytes repeated in place
  kTypeSwap,      // a number replaced by a string, bool, null, array or object
  kHugeNumber,    // a number replaced by 1e999, -1e309, 2^64, 30 digits, 1e-400
  kNanInf,        // a number replaced by NaN, Infinity, -inf (not JSON)
  kDeepNesting,   // a value wrapped in thousands of arrays / objects
  kDuplicateKey,  // a key repeated with another value
  kCount,
};

// Offsets in `text` where a number token starts.
inline std::vector<size_t> number_starts(const std::string& text) {
  std::vector<size_t> at;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' && (i == 0 || text[i - 1] != '\\')) in_string = !in_string;
    if (in_string) continue;
    const bool starts = (c == '-' || (c >= '0' && c <= '9')) && (i == 0 || text[i - 1] == ':' || text[i - 1] == ' ' ||
                                                                 text[i - 1] == '[' || text[i - 1] == ',');
    if (starts) at.push_back(i);
  }
  return at;
}

inline size_t number_end(const std::string& text, size_t begin) {
  size_t i = begin;
  while (i < text.size() && std::string("+-0123456789.eE").find(text[i]) != std::string::npos) ++i;
  return i;
}

// Replaces a random number token by one of `choices`; returns false when the text has no number.
inline bool replace_number(std::string& text, std::mt19937& rng, const std::vector<std::string>& choices) {
  const std::vector<size_t> at = number_starts(text);
  if (at.empty()) return false;
  const size_t b = at[rng() % at.size()];
  text.replace(b, number_end(text, b) - b, choices[rng() % choices.size()]);
  return true;
}

inline std::string mutate_text(std::string text, TextMutation kind, std::mt19937& rng) {
  if (text.empty()) return text;
  const size_t n = text.size();
  switch (kind) {
    case TextMutation::kByteFlip:
      for (int i = 1 + int(rng() % 3); i > 0; --i) text[rng() % n] ^= char(1 + rng() % 255);
      break;
    case TextMutation::kTruncate:
      text.resize(rng() % n);
      break;
    case TextMutation::kDelete: {
      const size_t b = rng() % n;
      text.erase(b, 1 + rng() % 16);
      break;
    }
    case TextMutation::kDuplicateRun: {
      const size_t b = rng() % n;
      text.insert(b, text.substr(b, 1 + rng() % 32));
      break;
    }
    case TextMutation::kTypeSwap:
      replace_number(text, rng, {"\"8\"", "true", "null", "[]", "{}", "[1, 2]", "{\"m\": 1}", "\"\""});
      break;
    case TextMutation::kHugeNumber:
      replace_number(
          text, rng,
          {"1e999", "-1e309", "18446744073709551616", "-9223372036854775809", "123456789012345678901234567890",
           "1e-400", "9223372036854775807", "2147483648", "-2147483649", "4.9e-324"});
      break;
    case TextMutation::kNanInf:
      replace_number(text, rng, {"NaN", "nan", "Infinity", "-Infinity", "inf", "-inf"});
      break;
    case TextMutation::kDeepNesting: {
      const std::vector<size_t> at = number_starts(text);
      const size_t b = at.empty() ? 0 : at[rng() % at.size()];
      const size_t e = at.empty() ? n : number_end(text, b);
      const int depth = rng() % 2 ? 100 + int(rng() % 100) : 20000 + int(rng() % 20000);
      const bool arrays = rng() % 2 == 0;
      std::string open, close;
      for (int i = 0; i < depth; ++i) {
        open += arrays ? "[" : "{\"x\":";
        close += arrays ? "]" : "}";
      }
      text = text.substr(0, b) + open + text.substr(b, e - b) + close + text.substr(e);
      break;
    }
    case TextMutation::kDuplicateKey: {
      // "key": value -> "key": <random value>, "key": value (nlohmann keeps the last one)
      std::vector<size_t> keys;
      for (size_t i = 0; i + 1 < n; ++i)
        if (text[i] == '"' && (i == 0 || text[i - 1] == '{' || text[i - 1] == ' ' || text[i - 1] == '\n'))
          keys.push_back(i);
      if (keys.empty()) break;
      const size_t b = keys[rng() % keys.size()];
      const size_t colon = text.find("\":", b + 1);
      if (colon == std::string::npos) break;
      const std::string key = text.substr(b, colon + 2 - b);
      static const char* const kValues[] = {"-1", "0", "\"h200\"", "null", "[0]", "1e300", "true"};
      text.insert(b, key + " " + kValues[rng() % 7] + ", ");
      break;
    }
    case TextMutation::kCount:
      break;
  }
  return text;
}

// 1..3 random mutations of any kind.
inline std::string mutate_text(const std::string& text, std::mt19937& rng) {
  std::string out = text;
  for (int i = 1 + int(rng() % 3); i > 0; --i)
    out = mutate_text(out, TextMutation(rng() % int(TextMutation::kCount)), rng);
  return out;
}

}  // namespace ovl::test
