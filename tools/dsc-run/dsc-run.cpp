//===- dsc-run.cpp - Train with a dsc plan --------------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc-run MODEL|PLAN [--steps N] [--data FILE|PREFIX] [--seed S] [--lr X]
//   [--microbatches M] [--log-interval K] [--log-json FILE] [--trace FILE]
// The work is in RunPlan.cpp so that tests can run it in-process.
//
//===----------------------------------------------------------------------===//

#include "CompileModel.h"
#include "RunPlan.h"

#include <iostream>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return dsc::run::dscRunMain(args, std::cout, std::cerr,
                              dsc::run::loadOrCompile);
}
