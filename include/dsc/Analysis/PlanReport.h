//===- PlanReport.h - Markdown, JSON and SVG plan reports -------*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Turns a search result into what a user reads: a Markdown (and HTML) page
// with the ranked plans and the reason for the choice, the same data as JSON
// for scripts, and an SVG scatter of throughput against memory.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_PLANREPORT_H
#define DSC_ANALYSIS_PLANREPORT_H

#include "dsc/Analysis/PlanSearch.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace mlir::dsc::analysis {

/// The inputs of a search, echoed at the top of every report.
struct ReportContext {
  const CostModel *model = nullptr;
  SearchOptions options;
  /// Where the cluster came from (file name), for the reader.
  std::string clusterSource;
  /// File name of the SVG as the Markdown should link it.
  std::string svgLink = "report.svg";
  /// The plan the user gave (--dsc-estimate): priced at the top of the
  /// report and compared with the winner, naming the knobs that differ.
  std::optional<PlanEstimate> given;
};

std::string renderMarkdown(const SearchResult &result,
                           const ReportContext &ctx);
/// The Markdown report as one self-contained HTML page (the SVG inline), for
/// a browser.
std::string renderHTML(const SearchResult &result, const ReportContext &ctx);
llvm::json::Value renderJSON(const SearchResult &result,
                             const ReportContext &ctx);
/// Predicted TFLOP/s per GPU against peak device memory per GPU for every
/// feasible plan; the winner is marked and labelled.
std::string renderSVG(const SearchResult &result, const ReportContext &ctx);

/// JSON of one estimate (used by the report and by tools).
llvm::json::Value estimateToJSON(const PlanEstimate &e);

/// Writes `path` (Markdown) and, next to it, the same stem with .json, .svg
/// and .html. A path ending in one of these extensions is treated as the
/// stem as well.
llvm::Error writeReport(const SearchResult &result, ReportContext ctx,
                        llvm::StringRef path);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_PLANREPORT_H
