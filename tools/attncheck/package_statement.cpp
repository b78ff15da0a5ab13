#include "package_statement.hpp"

#include <string_view>

namespace attn::cli {
namespace {

// The statement is written once with $...$ for mathematics, which both LaTeX and problemtools'
// Markdown (TeX math) read; sections differ, and \texttt{X} becomes `X` in Markdown.
struct Writer {
  StatementMarkup markup;
  std::string text;
  void title(const std::string& name) {  // 2023-07 takes the name from problem.yaml
    if (markup == StatementMarkup::latex) text += "\\problemname{" + name + "}\n\n";
  }
  void section(std::string_view name) {
    text += markup == StatementMarkup::latex ? "\\section*{" + std::string(name) + "}\n\n"
                                             : "## " + std::string(name) + "\n\n";
  }
  void paragraph(std::string_view body) { text += std::string(body) + "\n\n"; }
};

std::string number(std::size_t value) { return std::to_string(value); }

void reals_paragraph(Writer& w, const Limits& limits) {
  w.paragraph("Every real number is written in decimal as \\texttt{-?(0|[1-9][0-9]*)(.[0-9]+)?}, without a "
              "plus sign or an exponent, with at most " +
              number(limits.max_fraction_digits) + " digits after the point, and never as $-0$.");
}

void rounding_paragraph(Writer& w, int decimals) {
  const std::string zero = "0." + std::string(static_cast<std::size_t>(decimals), '0');
  w.paragraph("Print every value with exactly " + std::to_string(decimals) +
              " digits after the decimal point, single spaces between the values of a line, and write a "
              "value that rounds to zero as \\texttt{" + zero + "} (never \\texttt{-" + zero +
              "}). The value expected is the exact result for the decimal inputs, rounded to the nearest "
              "multiple of $10^{-" + std::to_string(decimals) +
              "}$. Where the exact result lies so close to a rounding boundary that a correct "
              "double-precision computation may land on either side, both neighbouring values are accepted.");
}

}  // namespace

std::string display_name(Problem problem) {
  switch (problem) {
    case Problem::ai006:
      return "Causal Attention";
    case Problem::ai031:
      return "Masked Multi-Head Attention";
    case Problem::general:
      return "Scaled Dot-Product Attention";
  }
  return "Attention";
}

std::string statement_text(Problem problem, const Limits& limits, StatementMarkup markup) {
  Writer w{markup, {}};
  w.title(display_name(problem));
  const std::string abs_qk = limits.max_abs_qk, abs_v = limits.max_abs_v;
  switch (problem) {
    case Problem::ai006:
      w.paragraph("Given three $n \\times d$ matrices $Q$, $K$ and $V$, compute causal attention: row $i$ "
                  "(counted from 1) attends to the rows $j \\le i$ only. Its scores are "
                  "$s_{ij} = (q_i \\cdot k_j) / \\sqrt{d}$, its weights "
                  "$w_{ij} = e^{s_{ij}} / \\sum_{l \\le i} e^{s_{il}}$, and its output is "
                  "$y_i = \\sum_{j \\le i} w_{ij} v_j$. The scores may be as large as $4 \\cdot 10^6$: compute the "
                  "exponentials so that they do not overflow.");
      w.section("Input");
      w.paragraph("The first line holds $n$ and $d$ ($1 \\le n \\le " + number(limits.max_n) + "$, $1 \\le d \\le " +
                  number(limits.max_d) + "$). Then follow the $n$ rows of $Q$, the $n$ rows of $K$ and the $n$ rows "
                  "of $V$, one row per line, $d$ real numbers each, every one of absolute value at most " +
                  abs_qk + ".");
      reals_paragraph(w, limits);
      w.section("Output");
      w.paragraph("Print $n$ lines, line $i$ holding the $d$ values of $y_i$.");
      rounding_paragraph(w, 4);
      break;
    case Problem::ai031:
      w.paragraph("Given three $n \\times d$ matrices $Q$, $K$ and $V$, a number of heads $h$ dividing $d$ and an "
                  "$n \\times n$ mask of zeros and ones, compute masked multi-head attention. Head $g$ "
                  "($0 \\le g < h$) uses the columns $[g \\cdot d/h, (g+1) \\cdot d/h)$ of $Q$, $K$ and $V$; its "
                  "scores are $s_{ij} = (q_i \\cdot k_j) / \\sqrt{d/h}$ over those columns (the square root of "
                  "the head's width, not of $d$), for the $j$ with mask value 1 in row $i$; its weights are the "
                  "softmax of those scores and its output the weighted sum of the rows of $V$, in its own columns. "
                  "The output row concatenates the heads in order. A row whose mask is all zeros outputs zeros.");
      w.section("Input");
      w.paragraph("The first line holds $n$, $d$ and $h$ ($1 \\le n \\le " + number(limits.max_n) +
                  "$, $1 \\le d \\le " + number(limits.max_d) + "$, $1 \\le h \\le " +
                  number(limits.max_heads) + "$, $h$ divides $d$). Then follow the $n$ rows of $Q$, of $K$ and of "
                  "$V$, one row per line, $d$ real numbers each (absolute value at most " + abs_qk +
                  " in $Q$ and $K$, " + abs_v + " in $V$), then the $n$ rows of the mask, $n$ values 0 or 1 each.");
      reals_paragraph(w, limits);
      w.section("Output");
      w.paragraph("Print $n$ lines of $d$ values: the attention output of every row.");
      rounding_paragraph(w, 2);
      break;
    case Problem::general:
      w.paragraph("Compute scaled dot-product attention $\\mathrm{softmax}(Q K^T / c) V$ for a batch of problems, "
                  "with heads, a mask and a scale $c$, as the input's header describes.");
      w.section("Input");
      w.paragraph("The first line holds $B$ $n$ $m$ $d_k$ $d_v$ $h$ $k$: batch items, queries, keys, the columns "
                  "of $Q$ and $K$, the columns of $V$, heads (dividing $d_k$ and $d_v$) and output decimals "
                  "($B \\le " + number(limits.max_batch) + "$, $n, m \\le " + number(limits.max_n) +
                  "$, $d_k, d_v \\le " + number(limits.max_d) + "$, $k \\le " +
                  std::to_string(limits.max_decimals) + "$). The second line holds MASK SCALE FORM: MASK is "
                  "\\texttt{none}, \\texttt{causal} (query $i$ sees keys $j \\le i$) or \\texttt{explicit}; SCALE is "
                  "\\texttt{none}, \\texttt{sqrt} ($c = \\sqrt{d_k/h}$) or a positive real $c$; FORM is \\texttt{qkv} "
                  "or \\texttt{self}. Then, for each batch item: with FORM \\texttt{qkv}, $Q$ ($n$ rows of $d_k$), "
                  "$K$ ($m$ rows of $d_k$) and $V$ ($m$ rows of $d_v$); with FORM \\texttt{self}, one matrix $X$ "
                  "($n$ rows of $d_k$, $n = m$, $d_k = d_v$) that is $Q$, $K$ and $V$; with MASK "
                  "\\texttt{explicit}, $n$ rows of $m$ values 0 or 1 (1: visible). Head $g$ uses columns "
                  "$[g d_k/h, (g+1) d_k/h)$ of $Q$ and $K$ and $[g d_v/h, (g+1) d_v/h)$ of $V$. Every value has "
                  "absolute value at most " + abs_qk + " (" + abs_v + " in $V$). A query that sees no key outputs "
                  "zeros.");
      reals_paragraph(w, limits);
      w.section("Output");
      w.paragraph("Print $B \\cdot n$ lines of $d_v$ values, the batch items one after another.");
      w.paragraph("Print every value with exactly $k$ digits after the decimal point, rounded to nearest from "
                  "the exact result for the decimal inputs, a value that rounds to zero without a minus sign; "
                  "where a correct double-precision computation may land on either side of a rounding "
                  "boundary, both neighbouring values are accepted.");
      break;
  }
  if (markup == StatementMarkup::markdown) {  // \texttt{X} (X without braces) becomes `X`
    for (std::size_t at = w.text.find("\\texttt{"); at != std::string::npos; at = w.text.find("\\texttt{", at)) {
      const std::size_t end = w.text.find('}', at);
      w.text.replace(at, end + 1 - at, "`" + w.text.substr(at + 8, end - at - 8) + "`");
    }
  }
  return w.text;
}

}  // namespace attn::cli
