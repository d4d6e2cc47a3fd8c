//===- DscInterfaces.cpp - dsc op interfaces --------------------*- C++ -*-===//
//
// Generated definitions of the cost, differentiation and communication
// interfaces, and how a communication event compares and prints.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscInterfaces.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::dsc;

#include "dsc/Dialect/Dsc/IR/DscInterfaces.cpp.inc"

bool CommunicationEvent::matchesCollective(
    const CommunicationEvent &other) const {
  return kind == other.kind && name == other.name &&
         reduction == other.reduction &&
         llvm::equal(payload, other.payload) &&
         parameters == other.parameters;
}

void CommunicationEvent::printParameters(llvm::raw_ostream &os) const {
  os << " ";
  llvm::interleave(
      parameters, os,
      [&](NamedAttribute attr) {
        os << attr.getName().getValue() << " = ";
        if (auto integer = dyn_cast<IntegerAttr>(attr.getValue()))
          os << integer.getInt();
        else
          os << attr.getValue();
      },
      " ");
}

void CommunicationEvent::print(llvm::raw_ostream &os) const {
  os << name << " of ";
  // A gradient bucket names dozens of states; the first few identify it and
  // the verifier reports the first differing one separately.
  constexpr size_t kShown = 4;
  if (payload.size() == 1) {
    os << payload.front();
  } else {
    os << "(";
    llvm::interleaveComma(llvm::ArrayRef(payload).take_front(kShown), os);
    if (payload.size() > kShown)
      os << ", ... " << payload.size() - kShown << " more";
    os << ")";
  }
  switch (kind) {
  case Kind::Collective:
    os << " over [";
    llvm::interleaveComma(axes, os);
    os << "]";
    if (reduction)
      os << " (" << stringifyReductionKind(*reduction) << ")";
    if (parameters && !parameters.empty())
      printParameters(os);
    break;
  case Kind::Send:
    os << " to " << (axes.empty() ? StringRef("?") : axes.front()) << "="
       << peer << " tag " << tag;
    break;
  case Kind::Recv:
    os << " from " << (axes.empty() ? StringRef("?") : axes.front()) << "="
       << peer << " tag " << tag;
    break;
  }
  if (kind != Kind::Collective && parameters && !parameters.empty())
    printParameters(os);
}
