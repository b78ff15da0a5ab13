// Cases for the portable checker's and validator's equivalence test (test_package_command.cpp):
// the rounding traps, the checker fuzz target's instances, and deterministic mutations that turn a
// correct program's output into the outputs of wrong ones (and a valid input into invalid ones).
#pragma once

#include <array>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"
#include "judge/checker.hpp"

namespace attn::testing_support {

struct Trap {
  const char* problem;
  const char* input;
};

/// Rounding traps (tests/verify/judge/test_checker.cpp): exact ties, a near tie a double cannot see, a
/// negative tie, a tiny negative value that must print as 0, all-masked rows, huge scores.
inline constexpr std::array<Trap, 9> kTraps{{
    {"ai031", "2 1 1\n1\n0\n0.5\n0.5\n0.12\n0.13\n1 1\n0 1\n"},                    // exact tie 0.125
    {"ai031", "2 1 1\n0.0000000001\n0\n0\n0.0000000001\n0\n2.25\n1 1\n0 1\n"},     // 1.125 + 5.6e-21
    {"ai031", "1 1 1\n1\n1\n-0.005\n1\n"},                                         // -0.005: 0.00 or -0.01
    {"ai006", "1 1\n1\n1\n-0.00000001\n"},                                         // prints 0.0000
    {"ai006", "2 1\n1\n1\n1\n1\n0.00005\n0.00015\n"},                              // ties at 4 decimals
    {"ai031", "2 2 2\n8 8\n8 8\n8 -8\n8 8\n1 -1\n-999.995 0.005\n0 0\n1 1\n"},     // masked row, ties
    {"ai006", "2 2\n1000 1000\n1000 -1000\n1000 1000\n1000 999.999\n1 2\n3 4\n"},  // huge scores
    {"general", "1 2 2 1 1 1 0\nnone sqrt qkv\n0\n0\n0\n0\n0.5\n1.5\n"},           // 0 decimals, tie at 1
    {"general", "2 1 2 2 2 2 3\ncausal none qkv\n1 1\n1 1\n1 -1\n2 -1\n0.0005 2\n1 1\n1 1\n1 1\n1 2\n3 4\n"},
}};

/// fuzz/checker.cpp's instances: byte 0 of a corpus file picks one, modulo their count.
inline const std::vector<std::pair<std::string, std::string>> kFuzzCases = {
    {"ai006", "3 2\n1 0\n0 1\n1 1\n1 0\n0 1\n1 1\n1 2\n3 4\n5 6\n"},
    {"ai006", "3 1\n1\n1\n1\n0\n0\n10\n1\n2\n100\n"},
    {"ai031", "2 4 2\n1 0 1 1\n0 1 2 0\n1 0 1 1\n1 1 2 0\n1 2 2 2\n3 0 2 2\n0 0\n1 1\n"},
    {"ai031", "2 1 1\n1\n1\n1\n1\n0.12\n0.13\n1 1\n1 0\n"},
    {"ai031", "2 2 1\n-8 8\n8 -8\n0.5 -0.5\n-0.5 0.5\n-0.001 1000\n0.004 -1000\n1 1\n1 1\n"},
    {"general", "2 1 2 1 2 1 0\nnone sqrt qkv\n1\n0\n0\n1 2\n3 4\n2\n1\n-1\n-2 -3\n5 -7\n"},
};

inline constexpr int kMutationKinds = 22;

/// Lines of whitespace-separated tokens.
inline std::vector<std::vector<std::string>> table_of(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> row;
    for (std::size_t at = start; at < end;) {
      const std::size_t stop = std::min(text.find(' ', at), end);
      row.push_back(text.substr(at, stop - at));
      at = stop + 1;
    }
    rows.push_back(row);
    start = end + 1;
  }
  return rows;
}

inline std::string text_of(const std::vector<std::vector<std::string>>& rows, const std::string& separator = " ",
                           const std::string& line_end = "\n") {
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out += (c ? separator : "") + row[c];
    out += line_end;
  }
  return out;
}

/// `correct` (a correct program's output) turned by mutation `kind` into another program's output:
/// right ones (as is, the other neighbour at an ambiguous cell, CRLF, no final newline, the answer
/// file itself) and wrong ones (a last digit off by one, "-0", a dropped, extra or reformatted
/// value, swapped rows, truncation, random bytes).
inline std::string mutate(const std::string& correct, const verify::Certificate& certificate,
                          const std::string& answer_path, int kind, std::mt19937_64& rng) {
  auto rows = table_of(correct);
  if (rows.empty() || rows[0].empty()) return correct;
  const std::size_t r = rng() % rows.size(), c = rng() % rows[r].size();
  std::string& token = rows[r][c];
  const std::string zero =
      token.find('.') == std::string::npos ? "0" : "0." + std::string(token.size() - token.find('.') - 1, '0');
  switch (kind) {
    case 0:
      return correct;
    case 1: {  // last digit +-1 without carrying
      char& last = token.back();
      last = last == '9' ? '8' : (last == '0' ? '1' : static_cast<char>(last + (rng() % 2 ? 1 : -1)));
      break;
    }
    case 2:  // every ambiguous cell at one end of its range
      for (std::size_t i = 0; i < certificate.cells.size(); ++i) {
        const auto& cell = certificate.cells[i];
        if (cell.ambiguous) rows[i / certificate.cols][i % certificate.cols] = rng() % 2 ? cell.lowest : cell.highest;
      }
      break;
    case 3:
      token = "-" + zero;
      break;
    case 4:
      rows[r].erase(rows[r].begin() + static_cast<long>(c));
      break;
    case 5:
      return text_of(rows, "  ");
    case 6:
      if (rows.size() > 1) std::swap(rows[r], rows[(r + 1) % rows.size()]);
      break;
    case 7:
      return text_of(rows, " ", " \r\n");
    case 8:
      rows.push_back({zero});
      break;
    case 9:
      return correct.substr(0, correct.size() - 1);
    case 10:
      token += "e0";
      break;
    case 11:
      token = (token[0] == '-' ? "-0" + token.substr(1) : "0" + token);
      break;
    case 12:
      token += "0";
      break;
    case 13:
      return correct.substr(0, rng() % correct.size());
    case 14:
      return slurp(answer_path);
    case 15: {
      std::string out = correct;
      const std::string alphabet = std::string("0123456789.- \n\t\re+x\0\xff", 21);
      for (int e = 0; e < 1 + static_cast<int>(rng() % 3); ++e) {
        const std::size_t at = rng() % (out.size() + 1);
        const char byte = alphabet[rng() % alphabet.size()];
        if (rng() % 2 || at == out.size()) {
          out.insert(at, 1, byte);
        } else {
          out[at] = byte;
        }
      }
      return out;
    }
    case 16:
      token = token[0] == '-' ? token.substr(1) : (token == zero ? "1" + token.substr(1) : "-" + token);
      break;
    case 17:
      return text_of(rows, "\t");
    case 18:
      rows.insert(rows.begin() + 1, std::vector<std::string>{});
      break;
    case 19:
      return verify::canonical_text(certificate);
    case 20: {  // the answer file with its section altered: no longer an echo (a sample's has none)
      std::string answer = slurp(answer_path);
      const std::size_t end = answer.find("# end");
      return end == std::string::npos ? answer + "1 1 0 0 band\n" : answer.insert(end, "1 1 0 0 band\n");
    }
    default:  // the values, then only the section's first line
      return correct + slurp(answer_path).substr(verify::canonical_text(certificate).size()).substr(0, 30) + "\n";
  }
  return text_of(rows);
}

/// A valid input broken in the ways the strict validator must refuse (and two it must accept).
inline std::vector<std::string> broken_inputs(const std::string& valid) {
  std::vector<std::string> out;
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = valid;
    const std::size_t at = text.find(from, text.find('\n'));  // after the header
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  out.push_back(valid.substr(0, valid.size() - 1));                  // no final newline
  out.push_back(valid + "\n");                                       // blank line at the end
  out.push_back(valid + "1\n");                                      // a token too many
  out.push_back(replaced("\n", "\r\n"));                             // CRLF
  out.push_back(replaced("\n", " \n"));                              // trailing space
  out.push_back(replaced(" ", "  "));                                // double space
  out.push_back(replaced(" ", "\t"));                                // tab
  out.push_back(replaced("1", "+1"));                                // plus sign
  out.push_back(replaced("1", "1e0"));                               // exponent
  out.push_back(replaced("1", "01"));                                // leading zero
  out.push_back(replaced("1", "1."));                                // bare point
  out.push_back(replaced("1", "1.000"));                             // trailing zeros: valid
  out.push_back(replaced("1", "1.0000000000"));                      // 10 digits after the point: valid
  out.push_back(replaced("1", "1.00000000000"));                     // 11: beyond the limit (problemtools' padding)
  out.push_back(replaced("0", "-0"));                                // negative zero
  out.push_back(replaced("1", "1000.0001"));                         // just over |x| <= 1000
  out.push_back(replaced("1", "0." + std::string(305, '0') + "1"));  // below 1e-300
  out.push_back(replaced("1", "1" + std::string(320, '0')));         // beyond a double
  out.push_back(replaced("1", "x"));                                 // a word
  out.push_back("0" + valid.substr(1));                              // n = 0 or header leading zero
  out.push_back("99999999999999999999" + valid.substr(1));           // huge header
  out.push_back(valid.substr(0, valid.size() / 2));                  // cut short
  return out;
}

}  // namespace attn::testing_support
