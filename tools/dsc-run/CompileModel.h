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
/// .yml/.yaml/.json GPT-NeoX config. The --dsc-compile options and the run
/// options come in layers (ResolveConfig.h): the GPT-NeoX config's training
/// keys (NeoXTrainingConfig.h), a --deepspeed ds_config
/// (dsc/Config/DeepSpeedConfig.h), then the flags and --compile, which win;
/// the run options the files set (--steps, --seed, --data, --save, ...)
/// are written into `options` where the command line did not give them.
/// The default warmup is capped at steps - 1 when the schedule decays
/// after it; an explicit warmup that does not fit the steps is an error.
/// With --print-config, prints the resolved configuration and returns an
/// empty plan (nothing compiled). Throws rt::Error with the compiler's
/// diagnostics.
rt::Plan loadOrCompile(RunOptions &options);

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_COMPILEMODEL_H
