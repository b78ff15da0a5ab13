// The token scanner: token positions (1-based line and byte column), lenient whitespace, the strict
// single-space / LF / final-newline rules with positioned errors, finish(), quote_token, the byte
// classes. Expected positions are counted by hand from the inputs written next to them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scanner.hpp"

namespace attn {
namespace {

struct Seen {
  std::string text;
  std::size_t line;
  std::size_t column;
  friend bool operator==(const Seen&, const Seen&) = default;
};

void PrintTo(const Seen& seen, std::ostream* os) {
  *os << "'" << seen.text << "' at " << seen.line << ":" << seen.column;
}

// Success of a call that returns an optional error, showing the error when there is one.
testing::AssertionResult no_error(const std::optional<ParseError>& error) {
  if (!error) return testing::AssertionSuccess();
  return testing::AssertionFailure() << error->to_string();
}

// Every token a lenient scanner finds, then asserts that finish() accepts what is left.
std::vector<Seen> lenient_tokens(std::string_view input) {
  Scanner scanner(input, false);
  std::vector<Seen> out;
  for (;;) {
    auto next = scanner.next();
    EXPECT_TRUE(next.ok()) << "lenient next() failed: " << next.error().to_string();
    if (!next.ok() || !next.value()) break;
    out.push_back({std::string(next.value()->text), next.value()->line, next.value()->column});
  }
  EXPECT_TRUE(no_error(scanner.finish()));
  return out;
}

// The token a strict scanner must produce next (fails the test otherwise).
Token strict_token(Scanner& scanner) {
  auto next = scanner.next();
  EXPECT_TRUE(next.ok()) << next.error().to_string();
  if (!next.ok() || !next.value()) {
    ADD_FAILURE() << "expected a token";
    return {};
  }
  return *next.value();
}

void expect_error(const std::optional<ParseError>& error, std::size_t line, std::size_t column,
                  const std::string& message) {
  ASSERT_TRUE(error.has_value()) << "expected an error at " << line << ":" << column;
  EXPECT_EQ(error->line, line);
  EXPECT_EQ(error->column, column);
  EXPECT_EQ(error->message, message);
}

void expect_error(const Result<std::optional<Token>>& result, std::size_t line, std::size_t column,
                  const std::string& message) {
  ASSERT_FALSE(result.ok()) << "expected an error at " << line << ":" << column;
  expect_error(std::optional<ParseError>(result.error()), line, column, message);
}

TEST(ScannerLenient, TokensCarryLineAndByteColumn) {
  // "ab" at 1:1, "c" after two spaces at 1:5; an empty line 2; "de" at 3:3, "f" after a tab at 3:6.
  EXPECT_EQ(lenient_tokens("ab  c\n\n  de\tf"),
            (std::vector<Seen>{{"ab", 1, 1}, {"c", 1, 5}, {"de", 3, 3}, {"f", 3, 6}}));
}

TEST(ScannerLenient, CrLfEndsALineAndIsNotPartOfTheToken) {
  EXPECT_EQ(lenient_tokens("1 2\r\n3\r\n\r\n 4\r\n"),
            (std::vector<Seen>{{"1", 1, 1}, {"2", 1, 3}, {"3", 2, 1}, {"4", 4, 2}}));
}

TEST(ScannerLenient, TabCountsAsOneByteColumn) {
  EXPECT_EQ(lenient_tokens("\t\tx\t y"), (std::vector<Seen>{{"x", 1, 3}, {"y", 1, 6}}));
}

TEST(ScannerLenient, EverySpaceByteSeparatesTokens) {
  EXPECT_EQ(lenient_tokens("a\vb\fc\rd"), (std::vector<Seen>{{"a", 1, 1}, {"b", 1, 3}, {"c", 1, 5}, {"d", 1, 7}}));
}

TEST(ScannerLenient, ColumnsCountBytesNotCharacters) {
  // "é" is two bytes in UTF-8, so the token after it and a space starts at byte column 4.
  EXPECT_EQ(lenient_tokens("\xc3\xa9 x"), (std::vector<Seen>{{"\xc3\xa9", 1, 1}, {"x", 1, 4}}));
}

TEST(ScannerLenient, NulIsATokenByte) {
  const std::string input("1\0 2", 4);
  EXPECT_EQ(lenient_tokens(input), (std::vector<Seen>{{std::string("1\0", 2), 1, 1}, {"2", 1, 4}}));
}

TEST(ScannerLenient, EmptyAndBlankInputsHaveNoToken) {
  EXPECT_TRUE(lenient_tokens("").empty());
  EXPECT_TRUE(lenient_tokens(" \t\r\n\v\f\n").empty());
}

TEST(ScannerLenient, SeparatorIsANoOp) {
  Scanner scanner("1\t\t2", false);
  EXPECT_EQ(strict_token(scanner).text, "1");
  EXPECT_TRUE(no_error(scanner.separator(true)));  // no '\n' here, and lenient does not care
  EXPECT_TRUE(no_error(scanner.separator(false)));
  const Token second = strict_token(scanner);
  EXPECT_EQ(second.text, "2");
  EXPECT_EQ(second.column, 4u);
}

TEST(ScannerLenient, FinishRejectsATrailingTokenAtItsPosition) {
  Scanner scanner("1 \n\t 2 3", false);
  EXPECT_EQ(strict_token(scanner).text, "1");
  // After "1": the space and the LF are skipped; "2" starts at line 2, column 3 (tab, space, '2').
  expect_error(scanner.finish(), 2, 3, "expected end of input, found '2'");
}

TEST(ScannerLenient, FinishAcceptsTrailingWhitespace) {
  Scanner scanner("7 \r\n\t\n", false);
  EXPECT_EQ(strict_token(scanner).text, "7");
  EXPECT_TRUE(no_error(scanner.finish()));
}

TEST(ScannerStrict, AcceptsSingleSpacesAndLfLines) {
  Scanner scanner("1 22\n333\n", true);
  const Token a = strict_token(scanner);
  EXPECT_TRUE(no_error(scanner.separator(false)));
  const Token b = strict_token(scanner);
  EXPECT_TRUE(no_error(scanner.separator(true)));
  const Token c = strict_token(scanner);
  EXPECT_TRUE(no_error(scanner.separator(true)));
  EXPECT_EQ((Seen{std::string(a.text), a.line, a.column}), (Seen{"1", 1, 1}));
  EXPECT_EQ((Seen{std::string(b.text), b.line, b.column}), (Seen{"22", 1, 3}));
  EXPECT_EQ((Seen{std::string(c.text), c.line, c.column}), (Seen{"333", 2, 1}));
  auto end = scanner.next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end.value().has_value());
  EXPECT_TRUE(no_error(scanner.finish()));
}

TEST(ScannerStrict, SecondSpaceIsAnErrorWhereItStands) {
  Scanner scanner("1  2\n", true);
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(false)));
  expect_error(scanner.next(), 1, 3, "expected a token, found ' '");
}

TEST(ScannerStrict, LeadingSpaceIsAnError) {
  Scanner scanner(" 1\n", true);
  expect_error(scanner.next(), 1, 1, "expected a token, found ' '");
}

TEST(ScannerStrict, TabSeparatorIsAnErrorShownEscaped) {
  Scanner scanner("1\t2\n", true);
  strict_token(scanner);
  expect_error(scanner.separator(false), 1, 2, "expected a single space, found '\\t'");
}

TEST(ScannerStrict, CrBeforeLfIsAnError) {
  Scanner scanner("1\r\n", true);
  strict_token(scanner);
  expect_error(scanner.separator(true), 1, 2, "expected a line end '\\n', found '\\r'");
}

TEST(ScannerStrict, SpaceBeforeLineEndIsAnError) {
  Scanner scanner("1 \n", true);
  strict_token(scanner);
  expect_error(scanner.separator(true), 1, 2, "expected a line end '\\n', found ' '");
}

TEST(ScannerStrict, LineEndWhereASpaceBelongsIsAnError) {
  Scanner scanner("1\n2\n", true);
  strict_token(scanner);
  expect_error(scanner.separator(false), 1, 2, "expected a single space, found '\\n'");
}

TEST(ScannerStrict, MissingFinalNewlineIsAnError) {
  Scanner scanner("1 2", true);
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(false)));
  strict_token(scanner);
  expect_error(scanner.separator(true), 1, 4, "expected a line end '\\n', found end of input");
}

TEST(ScannerStrict, BlankLineIsAnErrorOnItsLine) {
  Scanner scanner("1\n\n2\n", true);
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(true)));
  expect_error(scanner.next(), 2, 1, "expected a token, found a blank line");
}

TEST(ScannerStrict, FinishRejectsAnExtraLineEnd) {
  Scanner scanner("1\n\n", true);
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(true)));
  expect_error(scanner.finish(), 2, 1, "expected end of input, found '\\n'");
}

TEST(ScannerStrict, FinishRejectsATrailingToken) {
  Scanner scanner("1\nextra tokens\n", true);
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(true)));
  expect_error(scanner.finish(), 2, 1, "expected end of input, found 'extra'");
}

TEST(ScannerStrict, ErrorHereReportsTheCurrentPosition) {
  Scanner scanner("ab cd\nef", true);
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(false)));
  strict_token(scanner);
  ASSERT_TRUE(no_error(scanner.separator(true)));
  const ParseError error = scanner.error_here("why");
  EXPECT_EQ(error.to_string(), "line 2, column 1: why");
  EXPECT_TRUE(scanner.strict());
  EXPECT_FALSE(Scanner("", false).strict());
}

TEST(QuoteToken, QuotesPlainText) {
  EXPECT_EQ(quote_token("abc"), "'abc'");
  EXPECT_EQ(quote_token(""), "''");
  EXPECT_EQ(quote_token(" "), "' '");
}

TEST(QuoteToken, EscapesControlBytes) {
  EXPECT_EQ(quote_token("a\nb"), "'a\\nb'");
  EXPECT_EQ(quote_token("\r"), "'\\r'");
  EXPECT_EQ(quote_token("\t"), "'\\t'");
  EXPECT_EQ(quote_token(std::string("\0", 1)), "'\\x00'");
  EXPECT_EQ(quote_token("\x01\x1f\x7f"), "'\\x01\\x1f\\x7f'");
}

TEST(QuoteToken, NoByteLeavesAControlCharacterInTheMessage) {
  // An error message is one printable line whatever the input held.
  for (int byte = 0; byte < 256; ++byte) {
    const std::string quoted = quote_token(std::string(1, static_cast<char>(byte)));
    for (char c : quoted) {
      const auto u = static_cast<unsigned char>(c);
      EXPECT_TRUE(u >= 0x20 && u != 0x7f) << "byte " << byte << " quoted as " << quoted;
    }
  }
}

TEST(QuoteToken, FortyCharactersAreShownWhole) {
  const std::string forty(40, 'a');
  EXPECT_EQ(quote_token(forty), "'" + forty + "'");
}

TEST(QuoteToken, LongerTokensAreCutAfterForty) {
  const std::string token = std::string(40, 'a') + "XYZ";
  const std::string quoted = quote_token(token);
  EXPECT_EQ(quoted.rfind("'" + std::string(40, 'a'), 0), 0u) << quoted;
  EXPECT_EQ(quoted.find('X'), std::string::npos) << quoted;
  EXPECT_NE(quoted, "'" + std::string(40, 'a') + "'") << "a cut token must not look whole";
  // A megabyte token gives a short message.
  EXPECT_LT(quote_token(std::string(1 << 20, '9')).size(), 100u);
}

TEST(ScannerByteClasses, IsSpaceIsExactlyTheSixAsciiSpaces) {
  const std::string_view spaces(" \t\n\v\f\r");
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    EXPECT_EQ(is_space(c), spaces.find(c) != std::string_view::npos) << "byte " << byte;
  }
  static_assert(is_space('\v') && !is_space('\x1c') && !is_space('\xa0') && !is_space('\x85'));
}

TEST(ScannerByteClasses, IsDigitIsExactlyTheTenAsciiDigits) {
  const std::string_view digits("0123456789");
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    EXPECT_EQ(is_digit(c), digits.find(c) != std::string_view::npos) << "byte " << byte;
  }
  static_assert(is_digit('0') && is_digit('9') && !is_digit('/') && !is_digit(':') && !is_digit('\xb2'));
}

}  // namespace
}  // namespace attn
