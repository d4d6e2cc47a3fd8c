//===- Error.h - The runtime's error type -----------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc::rt::Error: thrown by the runtime's I/O and validation paths (data
// files, plans, checkpoints), never from kernels. what() names the cause.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_ERROR_H
#define DSC_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace dsc::rt {

/// A failure with a message that names the file (or object) and what is
/// wrong with it, fit to print as is: "dsc-run: error: <what()>".
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_ERROR_H
