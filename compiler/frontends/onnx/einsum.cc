// Einsum as a composition of the operators Hexir has: per operand a
// reduce_sum of the labels no one else reads, then per pair of operands a
// transpose to [batch, kept, contracted] / [batch, contracted, kept] order
// and one matmul with batch dims (a mul when nothing is contracted), and a
// transpose to the output's order. Each step is left out where it would do
// nothing, so "bij,bjk->bik" is exactly a MatMul. Three or more operands
// contract left to right, two at a time (as onnxruntime does), each
// intermediate keeping the labels the output or a later operand reads.
// Refused: a label repeated inside one term (a diagonal, "ii->i").
#include "frontends/onnx/handlers.h"

#include <algorithm>
#include <cctype>

namespace hexir::compiler::onnx_import {

namespace {

// A label: a letter's character code, or kEllipsis + j for the j-th of the
// ellipsis dims (right-aligned across operands, as numpy broadcasts them).
constexpr int kEllipsis = 256;

std::string label_text(int label) {
  if (label < kEllipsis) return std::string("'") + static_cast<char>(label) + "'";
  return "ellipsis dim " + std::to_string(label - kEllipsis);
}

// One term of the equation as written: its letters, and where its "..." was.
struct Term {
  std::string letters;
  int ellipsis_at = -1;  // index into letters where "..." stood; -1: none
};

struct Equation {
  std::vector<Term> inputs;
  std::optional<Term> output;  // none: implicit (numpy's rule)
};

Result<Term> parse_term(const NodeCtx& n, std::string_view text) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isalpha(static_cast<unsigned char>(c))) {
      t.letters += c;
    } else if (text.substr(i, 3) == "..." && t.ellipsis_at < 0) {
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
    } else {
      return error_at(n.loc, "equation term '" + std::string(text) + "' has '" + std::string(1, c) +
                                 "' (letters and one '...' only)");
    }
  }
  return t;
}

Result<Equation> parse_equation(const NodeCtx& n, const std::string& equation) {
  std::string s;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  Equation eq;
  const size_t arrow = s.find("->");
  const std::string lhs = s.substr(0, arrow);
  size_t begin = 0;
  while (true) {
    const size_t comma = lhs.find(',', begin);
    HEXIR_ASSIGN_OR_RETURN(Term t, parse_term(n, std::string_view(lhs).substr(begin, comma - begin)));
    eq.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (arrow != std::string::npos) {
    HEXIR_ASSIGN_OR_RETURN(Term t, parse_term(n, std::string_view(s).substr(arrow + 2)));
    eq.output = std::move(t);
  }
  return eq;
}

// An operand (or an intermediate result): its value and one label per dim.
struct Operand {
  Ref ref;
  std::vector<int> labels;
  std::vector<int64_t> dims;
};

// The labels of `t` for a tensor of rank `rank`, with `ellipsis_rank` the
// largest ellipsis of all operands (this term's ellipsis dims are its last ones).
std::vector<int> term_labels(const Term& t, size_t rank, size_t ellipsis_rank) {
  std::vector<int> labels;
  const size_t own = t.ellipsis_at < 0 ? 0 : rank - t.letters.size();
  for (size_t i = 0; i <= t.letters.size(); ++i) {
    if (static_cast<int>(i) == t.ellipsis_at)
      for (size_t j = 0; j < own; ++j) labels.push_back(kEllipsis + static_cast<int>(ellipsis_rank - own + j));
    if (i < t.letters.size()) labels.push_back(static_cast<unsigned char>(t.letters[i]));
  }
  return labels;
}

int64_t index_of(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) - labels.begin();
}
bool has(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

int64_t dim_of(const Operand& x, int label) { return x.dims[static_cast<size_t>(index_of(x.labels, label))]; }

// Builds the graph of one einsum node; `last` steps are named for the node's output.
class EinsumBuilder {
 public:
  EinsumBuilder(Importer& im, const NodeCtx& n) : im_(im), n_(n) {}

  // Sums the dims of `x` whose labels `keep` does not hold.
  Result<Operand> sum_unread(Operand x, const std::vector<int>& keep, bool last) {
    std::vector<int64_t> axes;
    Operand out{x.ref, {}, {}};
    for (size_t i = 0; i < x.labels.size(); ++i) {
      if (has(keep, x.labels[i])) {
        out.labels.push_back(x.labels[i]);
        out.dims.push_back(x.dims[i]);
      } else {
        axes.push_back(static_cast<int64_t>(i));
      }
    }
    if (axes.empty()) return x;
    ops::AttrMap attrs;
    attrs["axes"] = int_list(axes);
    attrs["keepdims"] = ops::AttrValue{int64_t{0}};
    HEXIR_ASSIGN_OR_RETURN(out.ref, im_.emit1(n_, ops::OpId::kReduceSum, {x.ref}, attrs, name(last, "sum")));
    return out;
  }

  // `x` with its dims in the order of `labels` (a permutation of its own).
  Result<Operand> permute(Operand x, const std::vector<int>& labels, bool last) {
    std::vector<int64_t> perm;
    bool identity = true;
    for (size_t i = 0; i < labels.size(); ++i) {
      perm.push_back(index_of(x.labels, labels[i]));
      identity = identity && perm.back() == static_cast<int64_t>(i);
    }
    if (identity) return x;
    Operand out{x.ref, labels, {}};
    for (int64_t p : perm) out.dims.push_back(x.dims[static_cast<size_t>(p)]);
    HEXIR_ASSIGN_OR_RETURN(out.ref, transpose(im_, n_, x.ref, perm, name(last, "transpose")));
    return out;
  }

  // The contraction of `a` and `b` with result labels `keep` (in this order).
  Result<Operand> contract(Operand a, Operand b, const std::vector<int>& keep, bool last) {
    // A dim of 1 against a larger one broadcasts: that operand no longer has the label.
    for (int l : std::vector<int>(a.labels)) {
      if (!has(b.labels, l)) continue;
      const int64_t da = dim_of(a, l), db = dim_of(b, l);
      if (da == db) continue;
      if (da != 1 && db != 1)
        return error_at(n_.loc, "label " + label_text(l) + " has size " + std::to_string(da) + " in one operand and " +
                                    std::to_string(db) + " in the other");
      if (da == 1) {
        HEXIR_ASSIGN_OR_RETURN(a, drop_unit(std::move(a), l));
      } else {
        HEXIR_ASSIGN_OR_RETURN(b, drop_unit(std::move(b), l));
      }
    }
    std::vector<int> batch, kept_a, kept_b, reduced;
    for (int l : keep) {
      const bool in_a = has(a.labels, l), in_b = has(b.labels, l);
      (in_a && in_b ? batch : in_a ? kept_a : kept_b).push_back(l);
    }
    std::vector<int> read_a = keep, read_b = keep;
    for (int l : a.labels)
      if (has(b.labels, l) && !has(keep, l)) reduced.push_back(l);
    read_a.insert(read_a.end(), reduced.begin(), reduced.end());
    read_b.insert(read_b.end(), reduced.begin(), reduced.end());
    HEXIR_ASSIGN_OR_RETURN(a, sum_unread(std::move(a), read_a, false));
    HEXIR_ASSIGN_OR_RETURN(b, sum_unread(std::move(b), read_b, false));

    std::vector<int> order_a = batch, order_b = batch;
    order_a.insert(order_a.end(), kept_a.begin(), kept_a.end());
    order_a.insert(order_a.end(), reduced.begin(), reduced.end());
    order_b.insert(order_b.end(), reduced.begin(), reduced.end());
    order_b.insert(order_b.end(), kept_b.begin(), kept_b.end());
    HEXIR_ASSIGN_OR_RETURN(a, permute(std::move(a), order_a, false));
    HEXIR_ASSIGN_OR_RETURN(b, permute(std::move(b), order_b, false));

    // [batch..., M, K] x [batch..., K, N], M, K, N each the product of its labels' dims.
    std::vector<int64_t> batch_dims(a.dims.begin(), a.dims.begin() + static_cast<int64_t>(batch.size()));
    const size_t nb = batch.size();
    const int64_t m = product(a.dims, nb, nb + kept_a.size());
    const int64_t k = product(a.dims, nb + kept_a.size(), a.dims.size());
    const int64_t nn = product(b.dims, nb + reduced.size(), b.dims.size());
    auto with_batch = [&](int64_t x, int64_t y) {
      std::vector<int64_t> d = batch_dims;
      d.push_back(x);
      d.push_back(y);
      return d;
    };
    Operand r{{}, batch, batch_dims};
    r.labels.insert(r.labels.end(), kept_a.begin(), kept_a.end());
    r.labels.insert(r.labels.end(), kept_b.begin(), kept_b.end());
    r.dims.insert(r.dims.end(), a.dims.begin() + static_cast<int64_t>(nb),
                  a.dims.begin() + static_cast<int64_t>(nb + kept_a.size()));
    r.dims.insert(r.dims.end(), b.dims.begin() + static_cast<int64_t>(nb + reduced.size()), b.dims.end());
    const bool reshape_after = r.dims != with_batch(m, nn);
    const bool permute_after = r.labels != keep;
    const bool product_last = last && !reshape_after && !permute_after;
    HEXIR_ASSIGN_OR_RETURN(Ref a2, im_.reshape(n_, a.ref, with_batch(m, reduced.empty() ? 1 : k),
                                               im_.helper_name(n_, "lhs")));
    HEXIR_ASSIGN_OR_RETURN(Ref b2, im_.reshape(n_, b.ref, with_batch(reduced.empty() ? 1 : k, nn),
                                               im_.helper_name(n_, "rhs")));
    // Nothing contracted: an outer product per batch, a broadcasting mul.
    const ops::OpId op = reduced.empty() ? ops::OpId::kMul : ops::OpId::kMatmul;
    HEXIR_ASSIGN_OR_RETURN(r.ref, im_.emit1(n_, op, {a2, b2}, {}, name(product_last, "product")));
    if (reshape_after) {
      HEXIR_ASSIGN_OR_RETURN(r.ref, im_.reshape(n_, r.ref, r.dims, name(last && !permute_after, "unflat")));
    }
    return permute(std::move(r), keep, last);
  }

 private:
  std::string name(bool last, const char* what) {
    return last ? im_.result_name(n_) : im_.helper_name(n_, what);
  }

  // `x` without its dim of size 1 labelled `label` (a reshape).
  Result<Operand> drop_unit(Operand x, int label) {
    const size_t i = static_cast<size_t>(index_of(x.labels, label));
    x.labels.erase(x.labels.begin() + static_cast<int64_t>(i));
    x.dims.erase(x.dims.begin() + static_cast<int64_t>(i));
    HEXIR_ASSIGN_OR_RETURN(x.ref, im_.reshape(n_, x.ref, x.dims, im_.helper_name(n_, "squeeze")));
    return x;
  }

  Importer& im_;
  const NodeCtx& n_;
};

}  // namespace

Status op_einsum(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"equation"}));
  HEXIR_ASSIGN_OR_RETURN(std::string text, im.attr_string(n, "equation", ""));
  HEXIR_ASSIGN_OR_RETURN(Equation eq, parse_equation(n, text));
  if (static_cast<int>(eq.inputs.size()) != n.node.input_size())
    return error_at(n.loc, "equation '" + text + "' has " + std::to_string(eq.inputs.size()) +
                               " operands, the node " + std::to_string(n.node.input_size()) + " inputs");

  std::vector<Operand> operands;
  size_t ellipsis_rank = 0;
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, static_cast<int>(i)));
    const Info info = im.info(r);
    const Term& t = eq.inputs[i];
    if (info.dims.size() < t.letters.size() || (t.ellipsis_at < 0 && info.dims.size() != t.letters.size()))
      return error_at(n.loc, "operand " + std::to_string(i) + " has rank " + std::to_string(info.dims.size()) +
                                 ", its term '" + t.letters + "' names " + std::to_string(t.letters.size()) +
                                 " dims");
    ellipsis_rank = std::max(ellipsis_rank, info.dims.size() - t.letters.size());
    operands.push_back({r, {}, info.dims});
  }
  std::map<int, int> uses;  // per label, how many operands have it
  for (size_t i = 0; i < operands.size(); ++i) {
    operands[i].labels = term_labels(eq.inputs[i], operands[i].dims.size(), ellipsis_rank);
    for (size_t j = 0; j < operands[i].labels.size(); ++j) {
      const int l = operands[i].labels[j];
      if (index_of(operands[i].labels, l) != static_cast<int64_t>(j))
        return error_at(n.loc, "label " + label_text(l) + " repeats in operand " + std::to_string(i) +
                                   " (a diagonal): not supported by the ONNX importer");
      ++uses[l];
    }
  }

  // The output's labels: as written, or numpy's implicit rule (the ellipsis
  // dims, then the letters used once, in alphabetical order).
  std::vector<int> out;
  if (eq.output) {
    const Term& t = *eq.output;
    if (t.ellipsis_at < 0 && ellipsis_rank > 0)
      return error_at(n.loc, "the output has no '...' for the operands' ellipsis dims");
    out = term_labels(t, t.letters.size() + (t.ellipsis_at < 0 ? 0 : ellipsis_rank), ellipsis_rank);
    for (size_t j = 0; j < out.size(); ++j) {
      if (index_of(out, out[j]) != static_cast<int64_t>(j))
        return error_at(n.loc, "label " + label_text(out[j]) + " repeats in the output");
      if (!uses.count(out[j]))
        return error_at(n.loc, "output label " + label_text(out[j]) + " is in no operand");
    }
  } else {
    for (size_t j = 0; j < ellipsis_rank; ++j) out.push_back(kEllipsis + static_cast<int>(j));
    for (const auto& [l, count] : uses)
      if (l < kEllipsis && count == 1) out.push_back(l);
  }

  EinsumBuilder b(im, n);
  Operand acc = operands[0];
  for (size_t i = 1; i < operands.size(); ++i) {
    // What the output or a later operand reads, in the output's order first.
    std::vector<int> keep;
    const bool last = i + 1 == operands.size();
    for (int l : out)
      if (has(acc.labels, l) || has(operands[i].labels, l)) keep.push_back(l);
    for (size_t later = i + 1; later < operands.size(); ++later)
      for (int l : operands[later].labels)
        if (!has(keep, l) && (has(acc.labels, l) || has(operands[i].labels, l))) keep.push_back(l);
    HEXIR_ASSIGN_OR_RETURN(acc, b.contract(std::move(acc), operands[i], keep, last));
  }
  if (operands.size() == 1) {
    const bool sums = acc.labels.size() != out.size();
    bool permutes = false;
    for (size_t j = 0; j < out.size(); ++j) permutes = permutes || index_of(acc.labels, out[j]) != static_cast<int64_t>(j);
    if (sums) {
      HEXIR_ASSIGN_OR_RETURN(acc, b.sum_unread(std::move(acc), out, !permutes));
    }
    HEXIR_ASSIGN_OR_RETURN(acc, b.permute(std::move(acc), out, true));
  }
  im.define(n, 0, acc.ref);
  return ok_status();
}

}  // namespace hexir::compiler::onnx_import
