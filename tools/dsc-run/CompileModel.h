//===- CompileModel.h - dsc-run's in-process compiler -----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Loads what dsc-run is given: a plan file as is, or a graph-level module or
// a GPT-NeoX config compiled with the same --dsc-compile pipeline dsc-opt
// runs, so that `dsc-run model.mlir` and the three-tool chain agree.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_COMPILEMODEL_H
#define DSC_TOOLS_DSCRUN_COMPILEMODEL_H

#include "RunOptions.h"

#include "dsc/Runtime/Plan.h"

namespace dsc::run {

/// The plan of `options.input`: read from a plan file, lowered from a
/// compiled .mlir module (dsc-opt --dsc-compile's output; --compile is then
/// an error), or compiled from a graph-level .mlir module or a
/// .yml/.yaml/.json GPT-NeoX config with --dsc-compile options
/// steps/lr/microbatches taken from the flags plus `options.compile`. The
/// default warmup is capped at steps - 1 when the schedule decays after it;
/// an explicit warmup that does not fit the steps is an error. With
/// --deepspeed FILE the ds_config's keys become --dsc-compile options
/// (dsc/Config/DeepSpeedConfig.h) under the flags and --compile, which win, and
/// set the log interval and communication overlap unless the flags did. Throws
/// rt::Error with the compiler's diagnostics.
rt::Plan loadOrCompile(RunOptions &options);

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_COMPILEMODEL_H
