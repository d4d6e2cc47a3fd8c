//===- LaunchError.h - dsc-launch's error value -----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Every reader and check of dsc-launch reports its refusal as one message
// (the tool prints it after "dsc-launch: error: " and exits 1).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCLAUNCH_LAUNCHERROR_H
#define DSC_TOOLS_DSCLAUNCH_LAUNCHERROR_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace dsc::launch {

/// An error carrying `message`.
inline llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace dsc::launch

#endif // DSC_TOOLS_DSCLAUNCH_LAUNCHERROR_H
